"""What a round across two processes costs the judge's clock (issue 30), measured alone.

The judge's clock over a candidate's round spans two CUDA contexts: the judge writes the inputs
(its context), the candidate's process calls the model (its context), the judge copies the
outputs (its context again). On a GPU without MPS the contexts are time-sliced. This probe asks
whether what the switches cost is a constant (which the judge's calibration can take out) or
grows with the work in between (which it cannot), on one region shared as the judge shares it:

1. switch: judge tiny kernel, the child's kernel of D ms (torch.cuda._sleep), judge tiny
   kernel; minus the same three in one process, for D from 0 to 5 ms.
2. traffic: the child writes W bytes of the shared region, the judge copies them out; minus the
   same in one process, for W from 1 MB to 6.4 GB.
3. whether MPS is there to be used.

    python3 benchmarks/switch_probe.py          (a JSON summary last)
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import subprocess
import sys
import time

REPS = 25


def child(fd_sock: int, fd_region: int, nbytes: int) -> None:
    import torch

    from kernelwright.sandbox.crossing import devmem

    sock = socket.socket(fileno=fd_sock)
    torch.cuda.set_device(0)
    region = devmem.DeviceRegion.open(fd_region, nbytes)
    flat = region.flat
    torch.cuda.synchronize()
    sock.send(b"ready")
    while True:
        msg = sock.recv(256).decode()
        if msg == "bye":
            break
        op, arg = msg.split(":")
        if op == "sleep":
            if int(arg) > 0:
                torch.cuda._sleep(int(arg))
        elif op == "write":
            flat[: int(arg)].fill_(3)
        torch.cuda.synchronize()
        sock.send(b"done")


def main() -> int:
    import torch

    from kernelwright.sandbox.crossing import devmem

    torch.cuda.set_device(0)
    summary: dict = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "mps_control": shutil.which("nvidia-cuda-mps-control"),
    }
    # cycles per ms of torch.cuda._sleep
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles_per_ms = 10_000_000 / start.elapsed_time(end)
    summary["sleep_cycles_per_ms"] = cycles_per_ms
    nbytes = 7 << 30
    region = devmem.DeviceRegion.create(nbytes)
    flat = region.flat
    snap = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", str(theirs.fileno()), str(region.fd), str(nbytes)],
        pass_fds=[theirs.fileno(), region.fd],
    )
    theirs.close()
    assert ours.recv(16) == b"ready"

    def round_(op: str, arg: int, remote: bool, copy: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        flat[:4].fill_(1)  # the judge's input write (tiny)
        torch.cuda.synchronize()
        if remote:
            ours.send(f"{op}:{arg}".encode())
            assert ours.recv(16) == b"done"
        else:
            if op == "sleep" and arg > 0:
                torch.cuda._sleep(arg)
            elif op == "write":
                flat[:arg].fill_(3)
            torch.cuda.synchronize()
        snap[: max(copy, 512)].copy_(flat[: max(copy, 512)])  # the judge's output copy
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    def med(op: str, arg: int, remote: bool, copy: int = 0) -> float:
        xs = [round_(op, arg, remote, copy) for _ in range(REPS + 3)][3:]
        return statistics.median(xs)

    switch = {}
    for d_ms in (0.0, 0.02, 0.1, 0.5, 1.0, 2.0, 5.0):
        cycles = int(d_ms * cycles_per_ms)
        local, remote = med("sleep", cycles, False), med("sleep", cycles, True)
        switch[f"{d_ms}ms"] = {
            "one_process_ms": round(local, 4),
            "two_processes_ms": round(remote, 4),
            "extra_ms": round(remote - local, 4),
        }
    summary["switch"] = switch
    traffic = {}
    for w in (1 << 20, 64 << 20, 1 << 30, 3200 << 20, 6400 << 20):
        local, remote = med("write", w, False, w), med("write", w, True, w)
        traffic[f"{w >> 20}MiB"] = {
            "one_process_ms": round(local, 4),
            "two_processes_ms": round(remote, 4),
            "extra_ms": round(remote - local, 4),
        }
    summary["traffic"] = traffic
    ours.send(b"bye")
    proc.wait(timeout=60)
    region.close()
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
