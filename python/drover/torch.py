"""PyTorch helper: the numbers that explain a run going wrong, logged every N steps.

    from drover.torch import TrainingMonitor
    monitor = TrainingMonitor(every=50)
    for step, batch in enumerate(loader):
        ...
        scaler.scale(loss).backward()
        monitor.step(step, model=model, scaler=scaler)   # after backward, before zero_grad
        scaler.step(optimizer); scaler.update(); optimizer.zero_grad()

Logged (as drover.log metrics): ``grad_norm`` (total L2 norm of the gradients: spikes mean a
gradient explosion), ``amp_scale`` (the GradScaler's scale: a collapsing scale means overflowing
fp16 gradients), and on CUDA ``cuda_allocated_bytes``, ``cuda_reserved_bytes`` and
``cuda_fragmentation`` ((reserved - allocated) / reserved: memory the caching allocator holds but
cannot use).
"""

import drover


def gradient_norm(model):
    """Total L2 norm of the parameters' gradients (0.0 when none has a gradient)."""
    import torch

    norms = [p.grad.detach().float().norm(2) for p in model.parameters() if p.grad is not None]
    if not norms:
        return 0.0
    return float(torch.norm(torch.stack(norms), 2))


def cuda_memory(device=None):
    """{"cuda_allocated_bytes", "cuda_reserved_bytes", "cuda_fragmentation"}, or {} without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return {}
    allocated = torch.cuda.memory_allocated(device)
    reserved = torch.cuda.memory_reserved(device)
    fragmentation = (reserved - allocated) / reserved if reserved > 0 else 0.0
    return {
        "cuda_allocated_bytes": allocated,
        "cuda_reserved_bytes": reserved,
        "cuda_fragmentation": fragmentation,
    }


class TrainingMonitor:
    """Logs gradient norm, AMP scale and CUDA allocator memory every `every` steps."""

    def __init__(self, every=50):
        if every < 1:
            raise ValueError("TrainingMonitor: every must be >= 1, got %r" % (every,))
        self.every = every

    def step(self, step, model=None, scaler=None):
        """Call once per training step; logs on every `every`-th step. Returns what it logged."""
        if step % self.every != 0:
            return {}
        metrics = {}
        if model is not None:
            metrics["grad_norm"] = gradient_norm(model)
        if scaler is not None and scaler.is_enabled():
            metrics["amp_scale"] = float(scaler.get_scale())
        metrics.update(cuda_memory())
        if metrics:
            drover.log(step=step, **metrics)
        return metrics
