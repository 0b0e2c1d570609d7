"""drover's Python client: report metrics, read parameters, find the checkpoint folder.

Standard library only. Under drover (``drover run`` / ``drover serve``) every call talks to the
run's environment; outside drover the same calls still work, printing the same JSON lines to
stdout, so a training script runs anywhere unchanged::

    import drover
    params = drover.params()                 # {"lr": 0.01, ...} under drover, {} outside
    for epoch in range(epochs):
        ...
        drover.log(step=epoch, loss=loss, val_acc=acc)
    ckpt = drover.Checkpointer(model=model, optimizer=opt, every=100)  # drover.checkpoint
    start = ckpt.resume()                    # the step after the saved one, 0 without one
    drover.log_hparams(args)                 # {"drover_hparams": {"args.lr": 0.01, ...}}

drover reads every stdout line that is a JSON object with numeric fields as metric points
(docs/spec.md, "Scheduling, metrics and recovery").
"""

import json
import math
import os
import pathlib
import sys
import time

__all__ = ["log", "params", "checkpoint_dir", "alert", "run_id", "attempt", "inside_drover",
           "log_hparams", "Checkpointer"]
__version__ = "0.1.0"

_out = sys.stdout


def inside_drover():
    """True when this process was started by drover."""
    return "DROVER_RUN_ID" in os.environ


def run_id():
    """The run's id under drover, else None."""
    value = os.environ.get("DROVER_RUN_ID")
    return int(value) if value else None


def attempt():
    """Which attempt this is (1, 2, ... after retries), or 1 outside drover."""
    return int(os.environ.get("DROVER_ATTEMPT", "1"))


def params():
    """The run's parameters as drover resolved them (after OOM halving too); {} outside drover."""
    text = os.environ.get("DROVER_PARAMS")
    if not text:
        return {}
    return json.loads(text)


def checkpoint_dir():
    """A folder that survives retries of this run (created on first use).

    Under drover it is the run's own folder in the store, the same for every attempt, so a
    retried run can resume; outside drover it is ./checkpoints.
    """
    path = pathlib.Path(os.environ.get("DROVER_CHECKPOINT_DIR") or "checkpoints")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _number(name, value):
    # bool is an int in Python, but a flag is not a metric.
    if isinstance(value, bool):
        raise TypeError("drover.log: %s=%r is a flag, not a number" % (name, value))
    if not isinstance(value, (int, float)):
        try:
            value = float(value)  # numpy and torch scalars
        except (TypeError, ValueError):
            raise TypeError("drover.log: %s=%r is not a number" % (name, value)) from None
    return value


def log(step=None, **metrics):
    """Report metric values, one JSON line on stdout: ``{"step": 3, "loss": 0.41}``.

    ``step`` is the x axis (an epoch or an iteration); without it drover counts lines. NaN and
    infinities are written as Python's json does (NaN, Infinity), which drover keeps: a diverged
    run must not look healthy.
    """
    if not metrics:
        raise TypeError("drover.log: give at least one metric, e.g. drover.log(step=1, loss=0.5)")
    line = {}
    if step is not None:
        line["step"] = _number("step", step)
    for name, value in metrics.items():
        if name == "step":
            continue
        line[name] = _number(name, value)
    _out.write(json.dumps(line) + "\n")
    _out.flush()


def alert(message, level="warning", key=None, **details):
    """Raise an alert from the run (e.g. "validation data looks empty").

    Written as one JSON line ``{"drover_alert": {...}}`` on stdout; it has no numeric top-level
    field, so it is never taken for a metric.
    """
    if level not in ("info", "warning", "error"):
        raise ValueError("drover.alert: level must be info, warning or error, got %r" % (level,))
    body = {"message": str(message), "level": level, "key": key or str(message), "t": time.time()}
    if details:
        body["details"] = details
    _out.write(json.dumps({"drover_alert": body}) + "\n")
    _out.flush()


HPARAM_REPR_MAX = 200


def hparam_value(value):
    """A value as it goes into a drover_hparams line: a number, string, bool or None as is,
    a numpy/torch scalar as its Python number, anything else its repr cut to 200 characters."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        try:  # a 0-d numpy array or tensor, a numpy scalar
            item = value.item()
        except Exception:
            item = None
        if isinstance(item, (bool, int, float)):
            return item
    text = repr(value)
    return text if len(text) <= HPARAM_REPR_MAX else text[:HPARAM_REPR_MAX]


def _flatten(prefix, mapping, out):
    from collections.abc import Mapping

    for key, value in mapping.items():
        name = "%s.%s" % (prefix, key) if prefix else str(key)
        if isinstance(value, Mapping) and value:
            _flatten(name, value, out)
        else:
            out[name] = hparam_value(value)


def emit_hparams(prefix, mapping):
    """Prints ``{"drover_hparams": {"<prefix>.<key>": value, ...}}`` (nested dicts flattened
    with dots); nothing when `mapping` is empty. Returns the flat dict."""
    flat = {}
    _flatten(prefix, mapping, flat)
    if flat:
        _out.write(json.dumps({"drover_hparams": flat}) + "\n")
        _out.flush()
    return flat


def log_hparams(*sources, **values):
    """Record hyper-parameters, one line ``{"drover_hparams": {"args.lr": 0.01, ...}}``.

    Each source is an argparse Namespace (its keys prefixed ``args.``, as autolog writes them)
    or a dict or other mapping (keys as given; nested mappings become dotted keys); keywords
    are keys as given.
    Values are numbers, strings, bools or None; anything else is written as its repr, cut to
    200 characters. The line has no numeric top-level field, so it is never a metric. Returns
    the flat dict it wrote.
    """
    import argparse
    from collections.abc import Mapping

    if not sources and not values:
        raise TypeError("drover.log_hparams: give a Namespace, a dict or keywords, "
                        "e.g. drover.log_hparams(lr=0.01)")
    flat = {}
    for source in sources:
        if isinstance(source, argparse.Namespace):
            _flatten("args", vars(source), flat)
        elif isinstance(source, Mapping):
            _flatten("", source, flat)
        else:
            raise TypeError("drover.log_hparams: %r is neither an argparse Namespace nor a mapping"
                            % (type(source).__name__,))
    _flatten("", values, flat)
    return emit_hparams("", flat)


from .checkpoint import Checkpointer  # noqa: E402  (it uses the functions above)
