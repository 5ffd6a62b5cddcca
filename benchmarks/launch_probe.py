"""Why a Triton launch costs more in the candidate's process than in a plain one (issue 30).

The judge v3 measured a candidate's launches at 2-4x a plain process's (RESULTS.md, 2026-12-04),
a cost that lands on the candidate's judged time. This probe takes the candidate process apart,
one layer at a time, and times the same launches in each:

- processes: plain; under bubblewrap alone; under bubblewrap with the seccomp filter; each with
  and without the judge's device arena (torch's allocator replaced by arena.c over a region this
  process created and the child imported);
- inside each process, in order: nothing installed; launches.install() (the launch counting);
  the audit-hook guard installed; the guard armed with the launching code in a candidate file.

Per stage: host microseconds per launch of a 4 KiB Triton copy into a held output, the same with
`torch.empty_like` for the output (what a candidate's forward does), a torch op, and a Triton
launch followed by a synchronize (launch to completion); then a 256 MiB `empty_like` (allocate
and free) and a torch op on 256 MiB, host time only (does a large output cost more to allocate
in the arena? session 19's LeakyReLU launched in 0.18 ms in the sandbox against 0.014 ms on
small tasks). Last, the audit events one armed launch raises.

    python3 benchmarks/launch_probe.py          (one JSON object per process, then a table)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

KERNEL = textwrap.dedent(
    """
    import time

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


    def per_call_us(fn, n=400, batches=5):
        fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best.append((t1 - t0) / n * 1e6)
        best.sort()
        return best[len(best) // 2]


    def measure():
        x = torch.randn(1024, device="cuda")
        y = torch.empty_like(x)

        def held():
            copy_kernel[(1,)](x, y, 1024, BLOCK=1024)

        def alloc():
            out = torch.empty_like(x)
            copy_kernel[(1,)](x, out, 1024, BLOCK=1024)
            return out

        def op():
            return x * 2.0

        def synced():
            copy_kernel[(1,)](x, y, 1024, BLOCK=1024)
            torch.cuda.synchronize()

        big = torch.randn(64 << 20, device="cuda")  # 256 MiB: a large task's output

        def big_empty():
            return torch.empty_like(big)

        def big_op():
            return big * 2.0

        return {
            "triton_us": per_call_us(held),
            "triton_alloc_us": per_call_us(alloc),
            "torch_op_us": per_call_us(op),
            "triton_sync_us": per_call_us(synced, n=200),
            "empty_256m_us": per_call_us(big_empty, n=100),
            "op_256m_us": per_call_us(big_op, n=20),
        }
    """
)


def child(home: str, arena_so: str, arena_fd: int, arena_nbytes: int) -> None:
    """One process: the layers of the candidate process added one by one."""
    import torch

    out: dict = {"pid_ns_init": os.getpid() == 1 or os.getppid() == 0}
    # The event counter goes in first: once the guard is installed it refuses a new audit hook
    # (it did, in the first run of this probe). Off until the count at the end.
    events: dict[str, int] = {}
    counting = [False]

    def count(event: str, args: tuple) -> None:
        if counting[0]:
            events[event] = events.get(event, 0) + 1

    sys.addaudithook(count)
    if arena_so:
        from kernelwright.sandbox.crossing.arena import install

        install(arena_so, arena_fd, arena_nbytes)
        os.close(arena_fd)
    else:
        torch.cuda.set_device(0)
    with open(os.path.join(home, "probe_kernel.py"), "w") as f:
        f.write(KERNEL)
    sys.path.insert(0, home)
    import probe_kernel  # the candidate's file: it lives in the candidate's home

    stages = {"plain": probe_kernel.measure()}
    from kernelwright.sandbox.candidate import launches

    launches.install()
    stages["launches"] = probe_kernel.measure()
    from pathlib import Path

    from kernelwright.sandbox.candidate.process import install_guard

    guard = install_guard(Path(home))
    stages["guard"] = probe_kernel.measure()
    with guard.active():
        stages["armed"] = probe_kernel.measure()
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    with guard.active():
        probe_kernel.copy_kernel[(1,)](x, y, 1024, BLOCK=1024)
        counting[0] = True
        for _ in range(10):
            probe_kernel.copy_kernel[(1,)](x, y, 1024, BLOCK=1024)
        counting[0] = False
    torch.cuda.synchronize()
    out["stages"] = stages
    out["events_per_launch"] = {k: v / 10 for k, v in sorted(events.items())}
    out["violations"] = [str(v) for v in guard.violations]
    print(json.dumps(out))


def main() -> int:
    import torch

    from kernelwright.sandbox.crossing import bwrap
    from kernelwright.sandbox.crossing.arena import build_allocator
    from kernelwright.sandbox.crossing.devmem import DeviceRegion

    torch.cuda.set_device(0)
    probe = bwrap.probe()
    print("bwrap:", probe, flush=True)
    lib_dir = tempfile.mkdtemp(prefix="kw-probe-lib-")
    so = str(build_allocator(__import__("pathlib").Path(lib_dir)))
    nbytes = 1 << 30
    region = DeviceRegion.create(nbytes)
    configs = [("plain", False, False, False), ("plain+arena", False, False, True)]
    if probe.works:
        configs += [
            ("bwrap", True, False, False),
            ("bwrap+seccomp", True, True, False),
            ("bwrap+seccomp+arena", True, True, True),
        ]
    rows = []
    for name, sandboxed, seccomp, arena in configs:
        home = tempfile.mkdtemp(prefix="kw-probe-home-")
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "HOME": home,
            "TMPDIR": home,
            "TRITON_CACHE_DIR": os.path.join(home, "triton"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        fd = region.fd if arena else -1
        inner = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            home,
            so if arena else "",
            str(fd),
            str(nbytes),
        ]
        fds = [fd] if arena else []
        if sandboxed:
            sfd = bwrap.seccomp_fd() if seccomp else None
            argv = bwrap.command(
                inner,
                readonly=[*bwrap.python_paths(), lib_dir, os.path.dirname(__file__)],
                writable=[home],
                env=env,
                device="cuda:0",
                seccomp_fd=sfd,
            )
            if sfd is not None:
                fds.append(sfd)
        else:
            argv = inner
        t0 = time.perf_counter()
        done = subprocess.run(argv, pass_fds=fds, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        line = (done.stdout.strip().splitlines() or [""])[-1]
        try:
            got = json.loads(line)
        except json.JSONDecodeError:
            print(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}", flush=True)
            continue
        got["config"], got["wall_s"] = name, round(wall, 1)
        print(json.dumps(got), flush=True)
        for stage, figures in got["stages"].items():
            rows.append((name, stage, figures))
    region.close()
    print(
        "\n| process | stage | triton us | triton+empty_like us | torch op us | triton+sync us "
        "| empty_like 256 MiB us | torch op on 256 MiB us (host) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, stage, f in rows:
        print(
            f"| {name} | {stage} | {f['triton_us']:.1f} | {f['triton_alloc_us']:.1f} "
            f"| {f['torch_op_us']:.1f} | {f['triton_sync_us']:.1f} "
            f"| {f['empty_256m_us']:.1f} | {f['op_256m_us']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(main())
