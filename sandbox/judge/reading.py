"""The judge's reading of a candidate's outputs: each one a plain judge tensor, its structure
checked first, read from the arena on a GPU (where the candidate left it; for a timed call, cut
from the copy the judge took inside its clock) and on CPU from the judge's own output slots or a
memfd of the candidate process's.

A part of Evaluation (evaluation.py), which mixes it in: its checked calls and the reuse check
read their outputs here, and so do the timed rounds (timed.py). Every place and description
comes from the candidate's process, so each is checked (the arena's bounds, the judge's slots,
the output limit) before a byte is read; a malformed one is rejected (rule protocol).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..crossing import transport
from .verdict import Verdict, _Opaque, _structure, _text


class OutputReading:
    """The candidate's outputs as judge tensors (the attributes are Evaluation's)."""

    if TYPE_CHECKING:  # the attributes and methods of Evaluation, which this is a part of
        arena: Any

        def __getattr__(self, name: str) -> Any: ...

    def rebuild(
        self, node: Any, fds: list[int], shape_name: str, what: str, snapshot: Any = None
    ) -> Any:
        """The candidate's output as plain judge tensors, after its structure was checked.

        snapshot: for a timed call, the judge's copies [(offset, nbytes, bytes)] of its leaves
        taken inside the clock; each arena leaf is cut from these, never read again."""
        shape = self.ctx.main if shape_name == "main" else self.ctx.variant
        self._normalise(node, shape_name)
        problem = _structure(node, shape.out_template, "out", self.w.device.type)
        if problem is not None:
            rule, message = problem
            status = "rejected" if rule == "output-type" else "incorrect"
            raise Verdict(status, f"{what}: {message}", rule=rule)
        leaves = iter(snapshot) if snapshot is not None else None
        return self._materialise_tree(node, fds, shape_name, leaves)

    def _normalise(self, node: Any, shape_name: str) -> None:
        """Give arena and slot leaves the tensor description the structure check reads (a
        slot's shape and dtype are the judge's own, whatever the candidate said)."""
        if not isinstance(node, dict):
            return
        for key in ("tuple", "list"):
            if isinstance(node.get(key), list):
                for v in node[key]:
                    self._normalise(v, shape_name)
        if isinstance(node.get("dict"), list):
            for pair in node["dict"]:
                if isinstance(pair, list) and len(pair) == 2:
                    self._normalise(pair[1], shape_name)
        if isinstance(node.get("arena"), dict):
            d = node["arena"]
            node["tensor"] = {
                "dtype": d.get("dtype"),
                "shape": d.get("shape"),
                "device": d.get("device", "cuda"),
            }
        elif "slot" in node:
            slot = self._slot(node["slot"], shape_name)
            node["tensor"] = {"dtype": slot.dtype, "shape": list(slot.shape), "device": "cpu"}

    def _slot(self, ref: Any, shape_name: str):
        _, layout = self.region_of(shape_name)
        ok = isinstance(ref, list) and len(ref) == 2 and all(isinstance(v, int) for v in ref)
        sets = len(layout.outputs)
        if not ok or not (0 <= ref[0] < sets and 0 <= ref[1] < len(layout.outputs[ref[0]])):
            raise Verdict("rejected", "an output names no slot of the judge's", rule="protocol")
        return layout.outputs[ref[0]][ref[1]]

    def _materialise_tree(self, node: Any, fds: list[int], shape_name: str, leaves: Any) -> Any:
        if "tuple" in node or "list" in node:
            items = [
                self._materialise_tree(v, fds, shape_name, leaves)
                for v in node.get("tuple", node.get("list"))
            ]
            return tuple(items) if "tuple" in node else items
        if "dict" in node:
            return {k: self._materialise_tree(v, fds, shape_name, leaves) for k, v in node["dict"]}
        if "arena" in node:
            return self.from_arena(node["arena"], leaves)
        if "slot" in node:
            region, _ = self.region_of(shape_name)
            return self._slot(node["slot"], shape_name).view(region.flat).clone()
        if "tensor" in node:
            return self.materialise(node["tensor"], fds, on_host=False)
        if "opaque" in node:
            return _Opaque(_text(node["opaque"]), bool(node.get("subclass")))
        return node.get("value")

    def from_arena(self, d: dict[str, Any], leaves: Any):
        """A judge-owned copy of an output where the candidate left it in the arena (or, for a
        timed call, cut from the copy the judge took inside its clock)."""
        from ..crossing.transport import DTYPES

        torch = self.torch
        dtype = DTYPES.get(d.get("dtype"))  # type: ignore[arg-type]
        shape: Any = d.get("shape")
        stride: Any = d.get("stride")
        offset: Any = d.get("offset")
        nbytes: Any = d.get("nbytes")
        ints = all(isinstance(v, int) and v >= 0 for v in (offset, nbytes))
        if dtype is None or not ints or not (_int_list(shape) and _int_list(stride)):
            raise Verdict("rejected", "a malformed output place", rule="protocol")
        if len(shape) != len(stride) or nbytes > self.output_limit():
            raise Verdict("rejected", "a malformed output place", rule="protocol")
        size = torch.empty((), dtype=dtype).element_size()
        numel = 1
        for n in shape:
            numel *= n
        reach = (sum((n - 1) * s for n, s in zip(shape, stride)) + 1) * size if numel else 0
        if reach > nbytes or offset % size:
            raise Verdict("rejected", "an output place smaller than its tensor", rule="protocol")
        if leaves is not None:
            taken = next(leaves, None)
            if taken is None or taken[0] != offset or taken[1] != nbytes:
                raise Verdict(
                    "rejected",
                    "a timed output described after the clock is not where the round said",
                    rule="protocol",
                )
            raw = taken[2]
        else:
            try:
                raw = self.arena.view(offset, nbytes)
            except ValueError:
                raise Verdict("rejected", "an output outside the arena", rule="protocol") from None
        if numel == 0:
            return torch.empty(tuple(shape), dtype=dtype, device=self.w.device)
        typed = raw[: nbytes - nbytes % size].view(dtype)
        view = typed.as_strided(tuple(shape), tuple(stride))
        return view.clone() if leaves is None else view

    def materialise(self, desc: dict[str, Any], fds: list[int], *, on_host: bool):
        """A judge-owned copy of a tensor the candidate process described in a memfd of its own
        (a snapshot: the candidate cannot change it afterwards)."""
        limit = self.output_limit()
        try:
            buffer, host = transport.rebuild(desc, fds, max_bytes=limit)
        except (transport.ProtocolError, OSError) as e:
            raise Verdict(
                "rejected", f"the candidate process sent a malformed tensor: {e}", rule="protocol"
            ) from None
        try:
            same_kind = str(desc.get("device", "")).startswith(self.w.device.type)
            if on_host or not same_kind or self.w.device.type == "cpu":
                return host.clone()  # a copy: the mapping is closed below
            return host.to(self.w.device)
        finally:
            del host
            buffer.close()


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**48 for v in value
    )
