"""Probe: how much of a memory-bound optimizer update (fused AdamW over 1.04e9
f32 parameters, like the 1.1B model's) hides under a compute-bound forward
(16 blocks of the 1.1B model's GEMMs at 8192 tokens) when the two run on
separate streams. Prints ms for each alone, in sequence and concurrently."""
import torch
dev = "cuda"
torch.manual_seed(0)
T = 8192
x = torch.randn(T, 2048, device=dev, dtype=torch.bfloat16)
h = torch.randn(T, 8192, device=dev, dtype=torch.bfloat16)
Ws = [torch.randn(2048, n, device=dev, dtype=torch.bfloat16) * 0.02 for n in (2048, 512, 512, 2048, 8192, 8192)]
Wd = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16) * 0.02
outs = [torch.empty(T, W.shape[1], device=dev, dtype=torch.bfloat16) for W in Ws]
outd = torch.empty(T, 2048, device=dev, dtype=torch.bfloat16)
N = 1_040_000_000
p = torch.zeros(N, device=dev, dtype=torch.float32, requires_grad=True)
p.grad = torch.randn(N, device=dev, dtype=torch.float32) * 1e-3
opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.1, fused=True)

def forward():
    for _ in range(16):
        for W, o in zip(Ws, outs):
            torch.matmul(x, W, out=o)
        torch.matmul(h, Wd, out=outd)

def update():
    opt.step()

hi = torch.cuda.Stream(priority=-1)
lo = torch.cuda.Stream(priority=0)

def timed(fn, reps=5):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]

def concurrent():
    cur = torch.cuda.current_stream()
    e = torch.cuda.Event(); e.record(cur)
    hi.wait_event(e); lo.wait_event(e)
    with torch.cuda.stream(lo):
        update()
    with torch.cuda.stream(hi):
        forward()
    cur.wait_stream(hi); cur.wait_stream(lo)

def concurrent_same_priority():
    cur = torch.cuda.current_stream()
    s1 = torch.cuda.Stream(); s2 = torch.cuda.Stream()
    e = torch.cuda.Event(); e.record(cur)
    s1.wait_event(e); s2.wait_event(e)
    with torch.cuda.stream(s2):
        update()
    with torch.cuda.stream(s1):
        forward()
    cur.wait_stream(s1); cur.wait_stream(s2)

for fn in (forward, update, concurrent):  # warm up
    fn()
f = timed(forward); u = timed(update)
seq = timed(lambda: (forward(), update()))
con = timed(concurrent); con2 = timed(concurrent_same_priority)
print(f"{torch.cuda.get_device_name()}: forward {f:.2f} ms, update {u:.2f} ms, "
      f"in sequence {seq:.2f} ms, concurrent (update low priority) {con:.2f} ms, "
      f"concurrent (same priority) {con2:.2f} ms; hidden {100*(seq-con)/u:.0f} % "
      f"and {100*(seq-con2)/u:.0f} % of the update")
