"""The child side of devmem_probe.py (run under bubblewrap by it)."""
# ruff: noqa: E402

import os
import resource
import socket
import sys
import time

fd_sock = int(sys.argv[1])
nbytes = int(sys.argv[2])
rlimit_gb = float(sys.argv[3])
if rlimit_gb > 0:
    resource.setrlimit(resource.RLIMIT_DATA, (int(rlimit_gb * 2**30), int(rlimit_gb * 2**30)))
import torch

from kernelwright.sandbox.crossing import devmem, transport

sock = socket.socket(fileno=fd_sock)
out = {}
try:
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    got = transport.receive(sock, None)
    t0 = time.perf_counter()
    region = devmem.DeviceRegion.open(got.fds[0], nbytes)
    torch.cuda.synchronize()
    out["import_ms"] = (time.perf_counter() - t0) * 1e3
    words = region.flat.view(torch.int32)
    out["checksum"] = int(words[: 1 << 20].sum().item())
    mine = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        mine.copy_(region.flat)
        torch.cuda.synchronize()
    out["copy_in_ms"] = (time.perf_counter() - t0) * 1e3
    region.flat[:16].fill_(7)
    torch.cuda.synchronize()
    import triton
    import triton.language as tl

    @triton.jit
    def k(x, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(x + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)

    y = torch.zeros(1 << 20, device="cuda")
    k[(1024,)](y, 1 << 20, B=1024)
    torch.cuda.synchronize()
    out["triton_ok"] = bool((y == 1).all().item())
    # /proc/<parent>/mem of the zygote-like parent in this namespace (pid 1 is bwrap's init).
    try:
        f = os.open(f"/proc/{os.getppid()}/mem", os.O_RDWR)
        os.close(f)
        out["ppid_mem"] = "opened"
    except OSError as e:
        out["ppid_mem"] = f"refused: {e.strerror}"
    transport.send(sock, {"ready": out})
    # ping-pong: blocking receive
    for mode in ("block", "spin"):
        if mode == "spin":
            sock.setblocking(False)
        while True:
            if mode == "spin":
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
            else:
                data = sock.recv(4096)
            if data == b"next":
                sock.setblocking(True)
                sock.send(b"ok")
                break
            sock.send(data)
    # hold 3 GiB for the NVML reading, then a long kernel for the time-slice reading
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    big.fill_(1)
    torch.cuda.synchronize()
    sock.send(b"holding")
    sock.recv(16)
    torch.cuda._sleep(int(2e9 * 0.2))
    sock.send(b"sleeping")
    torch.cuda.synchronize()
    sock.recv(16)
except BaseException as e:
    import traceback

    traceback.print_exc()
    try:
        transport.send(sock, {"error": repr(e)})
    except Exception:
        pass
