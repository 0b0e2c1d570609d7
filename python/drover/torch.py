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

Logged hyper-parameters (one ``{"drover_hparams": {...}}`` line per record, see
drover.log_hparams):

    drover.torch.autolog()        # from now on: user-defined nn.Module constructions and
                                  # ArgumentParser.parse_args() are recorded
    class Net(drover.torch.Module):   # or: this class records its own arguments, no autolog
        def __init__(self, hidden=128, dropout=0.1): ...
    Net(hidden=64)                # {"drover_hparams": {"Net.hidden": 64, "Net.dropout": 0.1}}
"""

import argparse
import functools
import inspect
import threading

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


# --- logged hyper-parameters -----------------------------------------------------------------

_local = threading.local()  # .depth: recorded constructors running on this thread
_autolog = {"on": False, "parse_args": None, "init_subclass": None, "modules": False}
_WRAPPED = "__drover_hparams_init__"


def _is_user_class(cls):
    module = getattr(cls, "__module__", "") or ""
    return not (module == "torch" or module.startswith("torch."))


def _record_args(self, func, args, kwargs):
    """{name: value} of a constructor call, defaults included, **kwargs spread out."""
    try:
        bound = inspect.signature(func).bind(self, *args, **kwargs)
    except (TypeError, ValueError):
        return None
    bound.apply_defaults()
    values = {}
    for i, (name, param) in enumerate(inspect.signature(func).parameters.items()):
        if i == 0 or name not in bound.arguments:
            continue  # self
        value = bound.arguments[name]
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            values.update(value)
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                values[name] = list(value)
        else:
            values[name] = value
    return values


def _wrap_init(cls):
    """Makes cls.__init__ record its arguments when it is the outermost recorded constructor
    running (so the layers a model builds inside its own __init__ are not recorded)."""
    init = cls.__dict__.get("__init__")
    if init is None:
        owner = next(c for c in cls.__mro__ if "__init__" in c.__dict__)
        if owner is not cls and owner is not object and _is_user_class(owner):
            _wrap_init(owner)  # its wrapper records under the class of the instance
            return
        init = cls.__init__  # torch's own: wrapped here, recorded under this class's name
    if getattr(init, _WRAPPED, False):
        return

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        try:
            init(self, *args, **kwargs)
        finally:
            _local.depth = depth
        # Only the instance's own class records (a parent's __init__ called through super() is
        # deeper), and only when autolog is on or the class derives from drover.torch.Module.
        if depth == 0 and (_autolog["modules"] or _is_drover_module(self)):
            values = _record_args(self, init, args, kwargs)
            if values is not None:
                drover.emit_hparams(type(self).__name__, values)

    setattr(__init__, _WRAPPED, True)
    cls.__init__ = __init__


def _is_drover_module(obj):
    base = globals().get("_Module")
    return base is not None and isinstance(obj, base)


def _all_subclasses(cls):
    seen, todo = [], list(cls.__subclasses__())
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.append(c)
            todo.extend(c.__subclasses__())
    return seen


def autolog(modules=True, args=True):
    """Record hyper-parameters from now on, each as a ``{"drover_hparams": {...}}`` line.

    modules: every construction of a user-defined ``torch.nn.Module`` subclass (any class not
        from torch itself, whenever it was defined) records its constructor's arguments,
        defaults included, as ``<ClassName>.<arg>``; only the outermost construction is
        recorded, so a model's own submodules and parents' __init__ calls add nothing.
    args: each ``argparse.ArgumentParser.parse_args()`` records the namespace it returns as
        ``args.<name>``.
    autolog(False, False) undoes it. Calling it again is harmless.
    """
    import torch

    if args and _autolog["parse_args"] is None:
        original = argparse.ArgumentParser.parse_args

        @functools.wraps(original)
        def parse_args(self, *a, **kw):
            namespace = original(self, *a, **kw)
            if isinstance(namespace, argparse.Namespace):
                drover.emit_hparams("args", vars(namespace))
            return namespace

        _autolog["parse_args"] = original
        argparse.ArgumentParser.parse_args = parse_args
    elif not args and _autolog["parse_args"] is not None:
        argparse.ArgumentParser.parse_args = _autolog["parse_args"]
        _autolog["parse_args"] = None

    base = torch.nn.Module
    if modules and not _autolog["modules"]:
        for cls in _all_subclasses(base):
            if _is_user_class(cls):
                _wrap_init(cls)
        previous = base.__dict__.get("__init_subclass__")

        def __init_subclass__(cls, **kwargs):
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            if _autolog["modules"] and _is_user_class(cls):
                _wrap_init(cls)

        _autolog["init_subclass"] = previous
        base.__init_subclass__ = classmethod(__init_subclass__)
        _autolog["modules"] = True
    elif not modules and _autolog["modules"]:
        # The constructors wrapped so far stay wrapped but record nothing.
        _autolog["modules"] = False
        if _autolog["init_subclass"] is not None:
            base.__init_subclass__ = _autolog["init_subclass"]
        else:
            del base.__init_subclass__
        _autolog["init_subclass"] = None
    _autolog["on"] = bool(modules or args)


def _make_module_class():
    import torch

    class Module(torch.nn.Module):
        """A torch.nn.Module whose subclasses record their constructor arguments (defaults
        included) as ``{"drover_hparams": {"<ClassName>.<arg>": value, ...}}`` when built,
        without autolog. Only the outermost recorded construction writes a line."""

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            _wrap_init(cls)

    Module.__module__ = __name__
    return Module


_Module = None


def __getattr__(name):
    # drover.torch.Module is made on first use, so importing drover.torch does not import torch.
    global _Module
    if name == "Module":
        if _Module is None:
            _Module = _make_module_class()
        return _Module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
