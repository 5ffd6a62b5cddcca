"""What the judge v3 design rests on, measured on the GPU machine in one run (issue 30).

1. Device memory across the wall: a region created by this process (sandbox/crossing/devmem.py), its
   descriptor passed to a child under bubblewrap with our seccomp filter and --cap-drop ALL,
   imported there; import time, exactness, a device-to-device copy each way.
2. The round trip of one request over the SEQPACKET channel, child blocking vs spinning (what a
   candidate that takes over its process could save on each timed round).
3. NVML: the child's device memory seen from here (per PID, and the device total).
4. RLIMIT_DATA in the child with CUDA and Triton running.
5. Time slicing: how long this process's tiny kernel waits behind the child's long one.

    python3 benchmarks/devmem_probe.py          (prints a JSON summary last)
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "devmem_child.py")


def main() -> int:
    import torch

    from kernelwright.sandbox.crossing import bwrap, devmem, transport
    from kernelwright.sandbox.judge import nvml

    summary: dict = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    torch.cuda.set_device(0)
    nbytes = 2 << 30
    t0 = time.perf_counter()
    region = devmem.DeviceRegion.create(nbytes)
    torch.cuda.synchronize()
    summary["create_ms"] = (time.perf_counter() - t0) * 1e3
    src = torch.randint(0, 1 << 30, (nbytes // 4,), dtype=torch.int32, device="cuda")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        region.flat.view(torch.int32).copy_(src)
        torch.cuda.synchronize()
    summary["fill_ms"] = (time.perf_counter() - t0) * 1e3
    expect = int(src[: 1 << 20].sum().item())
    probe = bwrap.probe()
    summary["bwrap"] = str(probe)
    for rlimit in (16.0,):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.set_inheritable(theirs.fileno(), True)
        inner = [sys.executable, CHILD, str(theirs.fileno()), str(nbytes), str(rlimit)]
        fds = [theirs.fileno()]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        if probe.works:
            sfd = bwrap.seccomp_fd()
            argv = bwrap.command(
                inner,
                readonly=bwrap.python_paths(),
                writable=[],
                env=env,
                device="cuda:0",
                seccomp_fd=sfd,
            )
            argv.insert(argv.index("--clearenv"), "--cap-drop")
            argv.insert(argv.index("--clearenv"), "ALL")
            if sfd is not None:
                fds.append(sfd)
        else:
            argv = inner
        child = subprocess.Popen(argv, pass_fds=fds, env=env)
        theirs.close()
        transport.send(ours, {"op": "region"}, [region.fd])
        got = transport.receive(ours, 120)
        ready = got.message.get("ready") if got else None
        summary["child"] = ready or (got.message if got else "no reply")
        if not ready:
            child.kill()
            break
        summary["exact"] = ready["checksum"] == expect
        summary["child_wrote"] = int(region.flat[:16].sum().item()) == 7 * 16
        for mode in ("block", "spin"):
            rtts = []
            for _ in range(2000):
                t0 = time.perf_counter_ns()
                ours.send(b"ping")
                ours.recv(16)
                rtts.append((time.perf_counter_ns() - t0) / 1e3)
            ours.send(b"next")
            ours.recv(16)
            rtts.sort()
            summary[f"rtt_us_{mode}"] = {
                "p10": rtts[200],
                "median": statistics.median(rtts),
                "p90": rtts[1800],
            }
        ours.recv(16)  # holding 3 GiB
        host = child.pid
        pids = {host, *[int(p) for p in os.listdir("/proc") if p.isdigit()]}
        procs = nvml.processes(0)
        summary["nvml_processes"] = procs
        summary["nvml_device_used_gib"] = (nvml.device_used(0) or 0) / 2**30
        summary["nvml_child_seen"] = bool(procs and (pids & procs.keys()) - {os.getpid()})
        summary["nvml_self_seen"] = bool(procs and os.getpid() in procs)
        ours.send(b"go")
        ours.recv(16)  # the child queued a 200 ms kernel
        time.sleep(0.01)
        tiny = torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tiny += 1
        torch.cuda.synchronize()
        summary["tiny_kernel_behind_child_ms"] = (time.perf_counter() - t0) * 1e3
        ours.send(b"bye")
        child.wait(timeout=60)
        summary["child_exit"] = child.returncode
    region.close()
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
