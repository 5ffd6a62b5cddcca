"""The "other shape" check's sizes: every size constant moved, most aggressive first, and the note
that says what a variant covered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .parse import MIN_SIZE, Size, Slot, Task, _sizes_text, _slot_values, _with_slots
from .probe import _Probe, _Prober

# -- the "other shape" variants --------------------------------------------------------------------
# Constants above SMALL_SIZE lose a seventh (at least 1) and are then made odd: an odd size is a
# multiple of no power-of-two block, and 16384 -> 14043, 4096 -> 3511, 64 -> 55 breaks any size
# the kernel hard-codes. Small constants (kernel sizes, strides, heads) move by one: 2 -> 3,
# 3..8 -> one less, so the variant is never larger than the task except where a 2 becomes 3.
SMALL_SIZE = 8
# The ratio-keeping variant scales every multiple of 4 by 3/4: a constant that divides another
# (groups | channels, heads | embed) still divides it, so a task with divisibility constraints
# still runs, and 512 -> 384, 64 -> 48 are no longer powers of two.
RATIO = (3, 4)
# Re-scaling rounds when the aggressive variant would still need more memory than the task.
MAX_VARIANT_SHRINK_ROUNDS = 4


# -- shapes to try ---------------------------------------------------------------------------------


def variant_overrides(task: Task) -> list[dict[str, Size]]:
    """Size settings for the "other shape" check, most aggressive first, each a full sizes dict.

    Every size of every constant (each varying element of a tuple constant) is moved:
    1. all of them (`_aggressive`: odd, about 1/7 smaller; small ones by one), re-shrunk while
       the task's tensors (inputs, parameters) would need more memory than at its own sizes;
    2. every multiple of 4 scaled by 3/4 (ratios and divisibility kept);
    3. every size one smaller (a 2 becomes 3), then every size one larger;
    4. all constants but one moved, for each one;
    5. one constant moved at a time.
    Later entries survive constraints between constants (channels % groups, kernel <= input) that
    make the reference itself fail at earlier ones; the caller tries them in order. Where the task
    runs on the meta device, the first entry is the first one the reference runs at there, with
    every size it left alone moved too if the reference still runs (a constraint may pin one
    constant, not the rest), and entries that fail there come last.
    """
    slots = _slot_values(task, task.sizes)
    if not slots:
        return []
    prober = _Prober(task)
    moves = {
        "aggressive": _no_larger(prober, slots, {s: _aggressive(v) for s, v in slots.items()}),
        "ratio": {
            s: v * RATIO[0] // RATIO[1] if v % RATIO[1] == 0 else v for s, v in slots.items()
        },
        "minus": {s: v - 1 if v > MIN_SIZE else v + 1 for s, v in slots.items()},
        "plus": {s: v + 1 for s, v in slots.items()},
    }
    aggressive = moves["aggressive"]
    ladder = [moves[k] for k in ("aggressive", "ratio", "minus", "plus")]
    names = list(dict.fromkeys(name for name, _ in slots))
    own = {k: [s for s in slots if s[0] == k] for k in names}
    if len(names) > 1:
        ladder += [{**aggressive, **{s: slots[s] for s in own[k]}} for k in names]
    ladder += [{**slots, **{s: aggressive[s] for s in own[k]}} for k in names]
    unique: list[dict[Slot, int]] = []
    for c in ladder:
        if c != slots and c not in unique:
            unique.append(c)
    ordered = _meta_ordered(prober, slots, unique, moves)
    base = prober.slots(slots)
    if base is not None and base.built:  # another network is no variant of this one
        ordered = [c for c in ordered if (p := prober.slots(c)) is None or p.same_modules(base)]
    return [_with_slots(task.sizes, c) for c in ordered]


def structural_constants(task: Task) -> list[str]:
    """The size constants that change the model's modules (its parameters' and buffers' names)
    when moved alone, as the variants move them: ResNet's `layers`, a number of stages. Moving
    one makes another network, so no variant moves it (a candidate may be written for the
    task's network). Empty where the model does not build on meta at the task's sizes."""
    slots = _slot_values(task, task.sizes)
    prober = _Prober(task)
    base = prober.slots(slots)
    if base is None or not base.built:
        return []
    out = []
    for name in dict.fromkeys(n for n, _ in slots):
        moved = {s: _aggressive(v) if s[0] == name else v for s, v in slots.items()}
        probe = prober.slots(moved)
        if probe is not None and not probe.same_modules(base):
            out.append(name)
    return out


def variant_note(task: Task, sizes: Mapping[str, Size], tried: Sequence[str] = ()) -> str:
    """What the "other shape" check at `sizes` covered: the constants it varied and those it did
    not (a tuple constant moved in part is named element by element: `kernel_size[1]`).

    tried: the variants the reference itself failed at before this one, one line each.
    """
    base, other = _slot_values(task, task.sizes), _slot_values(task, sizes)
    varied: list[str] = []
    kept: list[str] = []
    for name in task.constants:
        own = [s for s in base if s[0] == name]
        moved = [s for s in own if other[s] != base[s]]
        if len(moved) == len(own) or not moved:
            (varied if moved else kept).append(name)
        else:
            varied += [f"{name}[{i}]" for _, i in moved]
            kept += [f"{name}[{i}]" for _, i in own if (name, i) not in moved]
    note = f"also checked at {_sizes_text(sizes)} (varied: {', '.join(varied) or 'none'}"
    structural = [k for k in structural_constants(task) if k in kept] if kept else []
    if structural:
        kept = [k for k in kept if k not in structural]
        them = "it" if len(structural) == 1 else "them"
        note += f"; not varied: {', '.join(structural)} (moving {them} changes the model's "
        note += "modules, not only their sizes: another network)"
    if kept:
        note += f"; not varied: {', '.join(kept)}, the reference failing at every variant tried "
        note += "that moves them too"
        if tried:
            note += f", e.g. {tried[0]}"
    return note + ")"


def _meta_ordered(
    prober: _Prober,
    slots: dict[Slot, int],
    ladder: list[dict[Slot, int]],
    moves: dict[str, dict[Slot, int]],
) -> list[dict[Slot, int]]:
    """`ladder` with the first entry the reference builds (and runs) at on meta first, extended
    to every size it can also move there, and entries meta refuses last. Unchanged where the task
    tells nothing on meta (its Model does not build there at its own sizes)."""
    base = prober.slots(slots)
    if base is None or not base.built:
        return ladder
    refused: list[dict[Slot, int]] = []
    for entry in ladder:
        probe = prober.slots(entry)
        if probe is not None and probe.as_valid_as(base):
            best = _extended(prober, slots, entry, moves, base)
            rest = [c for c in ladder if c not in (best, entry) and c not in refused]
            return [best, *([entry] if entry != best else []), *rest, *refused]
        refused.append(entry)
    return ladder


def _extended(
    prober: _Prober,
    slots: dict[Slot, int],
    entry: dict[Slot, int],
    moves: dict[str, dict[Slot, int]],
    base: _Probe,
) -> dict[Slot, int]:
    """`entry` with the sizes it leaves at the task's values moved too, where the reference still
    builds and runs on meta in no more memory: each alone (aggressively, else one down, else one
    up; the large sizes already moved shrink further to make room, as `_no_larger` does), then
    the multiples of 4 left together by 3/4, else the large ones among them (a constraint tying
    two of them holds when both scale: `embed_dim % num_heads == 0`, `out_channels` == a
    convolution's output width, where its kernel size must stay)."""
    current = dict(entry)
    limit = max(base.bytes, prober.slots(entry).bytes)  # type: ignore[union-attr]  # entry fits

    def fits(trial: dict[Slot, int]) -> dict[Slot, int] | None:
        probe = prober.slots(trial)
        if probe is not None and probe.as_valid_as(base) and probe.bytes > limit:
            trial = _no_larger(prober, slots, trial, limit)
            probe = prober.slots(trial)
        ok = probe is not None and probe.as_valid_as(base) and probe.bytes <= limit
        return trial if ok else None

    for s, value in slots.items():
        if current[s] != value:
            continue
        for move in ("aggressive", "minus", "plus"):
            alt = moves[move][s]
            trial = fits({**current, s: alt}) if alt != value else None
            if trial is not None and trial[s] != value:
                current = trial
                break
    left = [s for s, v in slots.items() if current[s] == v and v % RATIO[1] == 0]
    large = [s for s in left if slots[s] > SMALL_SIZE]
    for group in (left, large):  # with the small ones (num_heads), else without (a kernel size)
        scaled = {**current, **{s: moves["ratio"][s] for s in group}}
        if len(group) > 1 and (trial := fits(scaled)) is not None:
            return trial
    return current


def _no_larger(
    prober: _Prober,
    slots: dict[Slot, int],
    variant: dict[Slot, int],
    limit: int | None = None,
) -> dict[Slot, int]:
    """`variant` with its large sizes moved further until it needs no more memory than the task
    at `slots` (or than `limit` bytes). Where the footprint cannot be measured on meta, `variant`
    is returned unchanged.
    """
    base = prober.slots(slots)
    if base is None:
        return variant
    limit = base.bytes if limit is None else limit
    for _ in range(MAX_VARIANT_SHRINK_ROUNDS):
        probe = prober.slots(variant)
        if probe is None or not probe.as_valid_as(base) or probe.bytes <= limit:
            return variant
        variant = {s: _aggressive(v) if v > SMALL_SIZE else v for s, v in variant.items()}
    return variant


def _aggressive(v: int) -> int:
    """A value that breaks hard-coded sizes and block multiples, no larger except for 2 -> 3."""
    if v > SMALL_SIZE:
        w = v - max(1, v // 7)
        return w - 1 if w % 2 == 0 else w
    return v + 1 if v <= MIN_SIZE else v - 1
