"""Preemption-safe checkpoints: save every N steps and when SIGTERM arrives, resume at start.

    import drover
    ckpt = drover.Checkpointer(model=model, optimizer=optimizer, every=100)
    start = ckpt.resume()                 # 0 without a checkpoint, else the saved step + 1
    for step in range(start, total_steps):
        ...train one step...
        drover.log(step=step, loss=loss)
        ckpt.step(step)                   # saves every `every` steps; on SIGTERM saves, exits 143

Checkpoints live in ``drover.checkpoint_dir()`` (``$DROVER_CHECKPOINT_DIR`` under drover, one
folder per run kept across attempts and preemptions; ``./checkpoints`` outside drover) as
``ckpt-<step>.pt``. Each save is atomic: the state is written to a temporary file in the same
folder, fsynced, renamed over the final name with ``os.replace`` and the folder is fsynced, so a
crash or SIGKILL mid-save leaves the previous checkpoint whole. The latest ``keep`` (2) are kept.

Every checkpoint holds, besides the given objects' state, the random number generators' states
(Python's ``random``, NumPy's global generator, torch's CPU generator and, when CUDA is in use,
each GPU's), so a resumed run draws the same numbers an uninterrupted one would have.

Lines on stdout (no numeric top-level field, so drover never takes them for metrics):

    {"drover_checkpoint": {"step": 99, "path": "ckpt-000000099.pt", "t": 1700000000.5}}
    {"drover_resume": {"step": 99}}

torch is imported only when the program has imported it already (or a checkpoint written by
``torch.save`` is loaded); without torch, state is plain picklable objects and files are pickles.
"""

import json
import os
import pickle
import random
import re
import signal
import sys
import threading
import time

import drover

__all__ = ["Checkpointer", "SIGTERM_EXIT_CODE", "latest_checkpoint", "list_checkpoints"]

SIGTERM_EXIT_CODE = 128 + int(signal.SIGTERM)  # 143: what a shell reports for a SIGTERM death

_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
_TEMP = re.compile(r"^\.ckpt-\d+\.pt\.[0-9]+\.[0-9a-f]+\.tmp$")
_FORMAT = 1


def _emit(key, body):
    drover._out.write(json.dumps({key: body}) + "\n")
    drover._out.flush()


def _warn(message):
    sys.stderr.write("drover.Checkpointer: %s\n" % message)
    sys.stderr.flush()


def list_checkpoints(directory):
    """[(step, path), ...] of the checkpoints in `directory`, oldest step first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        m = _NAME.match(name)
        if m:
            found.append((int(m.group(1)), os.path.join(str(directory), name)))
    found.sort()
    return found


def latest_checkpoint(directory=None):
    """The newest checkpoint's path in `directory` (default drover.checkpoint_dir()), or None."""
    found = list_checkpoints(directory if directory is not None else drover.checkpoint_dir())
    return found[-1][1] if found else None


def _torch_loaded():
    return "torch" in sys.modules


# --- random number generators ---------------------------------------------------------------

def _rng_state():
    state = {"python": random.getstate()}
    np = sys.modules.get("numpy")
    if np is not None:
        state["numpy"] = np.random.get_state()
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_rng_state()
        try:
            # Only when the program uses CUDA: get_rng_state_all() would otherwise create a
            # context on every visible GPU.
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                state["torch_cuda"] = torch.cuda.get_rng_state_all()
        except Exception as e:  # pragma: no cover - a broken CUDA setup must not stop the save
            _warn("CUDA random state not saved: %s" % e)
    return state


def _set_rng_state(state):
    if "python" in state:
        random.setstate(state["python"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "torch" in state:
        import torch

        torch.set_rng_state(state["torch"])
        cuda = state.get("torch_cuda")
        if cuda is not None:
            if torch.cuda.is_available():
                count = torch.cuda.device_count()
                if count != len(cuda):
                    _warn("the checkpoint has the random state of %d GPUs, this process sees %d"
                          % (len(cuda), count))
                for i, s in enumerate(cuda[:count]):
                    torch.cuda.set_rng_state(s, i)
            else:
                _warn("the checkpoint has CUDA random states but CUDA is not available here")


# --- reading and writing ---------------------------------------------------------------------

def _load_file(path):
    import zipfile

    if zipfile.is_zipfile(path):  # torch.save's format
        import torch

        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except TypeError:  # torch before 1.13 has no weights_only
            return torch.load(path, map_location="cpu")
    with open(path, "rb") as f:
        return pickle.load(f)


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - e.g. a platform that cannot open folders
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on a folder
        pass
    finally:
        os.close(fd)


def _write_atomically(directory, name, state):
    """Writes `state` to directory/name so that the name only ever holds a complete file."""
    final = os.path.join(directory, name)
    temp = os.path.join(directory, ".%s.%d.%s.tmp" % (name, os.getpid(), os.urandom(4).hex()))
    # os.open rather than mkstemp: the file gets the umask's permissions (mkstemp's are 0600).
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if _torch_loaded():
                import torch

                torch.save(state, f)
            else:
                pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, final)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    return final


# --- the checkpointer ------------------------------------------------------------------------

class Checkpointer:
    """Saves and restores a training loop's state; see the module's docstring.

    Objects to save are given by name: ``model``, ``optimizer``, ``scaler``, ``scheduler``,
    ``extra`` and any other keyword. Each is either an object with ``state_dict()`` and
    ``load_state_dict()`` (torch modules, optimizers, GradScalers, LR schedulers, your own), or a
    dict or list, saved as is and restored in place (``extra={"best": 0.0}``).

    every: save after every `every` calls of step() (counted from the start or the resume);
        0 or None saves only on SIGTERM and save_now().
    keep: how many checkpoints to keep (the newest by step; at least 1).
    directory: default drover.checkpoint_dir().
    signals: the signals that ask for a save and a stop (default SIGTERM). Their handlers only
        set a flag; the save happens at the next step(). A Python handler that was installed
        before is called too; a process forked from this one (a DataLoader worker) that gets
        the signal dies of it as it would without the Checkpointer.
    exit_code: the exit status after the save a signal asked for (143 = 128 + SIGTERM).
    rng: save and restore the random number generators (default True).
    """

    def __init__(self, model=None, optimizer=None, scaler=None, scheduler=None, extra=None,
                 every=100, keep=2, directory=None, signals=(signal.SIGTERM,),
                 exit_code=SIGTERM_EXIT_CODE, rng=True, **objects):
        if every is not None and (not isinstance(every, int) or isinstance(every, bool)
                                  or every < 0):
            raise ValueError("Checkpointer: every must be a whole number >= 0, got %r" % (every,))
        if not isinstance(keep, int) or keep < 1:
            raise ValueError("Checkpointer: keep must be at least 1, got %r" % (keep,))
        named = {"model": model, "optimizer": optimizer, "scaler": scaler,
                 "scheduler": scheduler, "extra": extra}
        named.update(objects)
        self.objects = {k: v for k, v in named.items() if v is not None}
        for name, obj in self.objects.items():
            stateful = callable(getattr(obj, "state_dict", None)) and callable(
                getattr(obj, "load_state_dict", None))
            if not stateful and not isinstance(obj, (dict, list)):
                raise TypeError(
                    "Checkpointer: %s=%r has no state_dict()/load_state_dict(); give such an "
                    "object, a dict or a list" % (name, type(obj).__name__))
        self.every = every or 0
        self.keep = keep
        self.exit_code = exit_code
        self.rng = rng
        self._directory = str(directory) if directory is not None else None
        self._since_save = 0
        self._last_step = None
        self.last_saved_step = None
        self.last_saved_path = None
        self.loaded = None  # the whole payload resume() read, for anything step() does not restore
        self._stop = threading.Event()
        self._pid = os.getpid()
        self._previous = {}
        # DDP and friends: only rank 0 writes; every rank resumes and stops on the signal.
        self.writer = os.environ.get("RANK", "0") in ("", "0")
        self._install(signals)

    # -- signals ------------------------------------------------------------------------------

    def _install(self, signals):
        if threading.current_thread() is not threading.main_thread():
            if signals:
                _warn("not in the main thread: no signal handler installed, a SIGTERM will "
                      "end the process without a save")
            return
        for sig in signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        previous = self._previous.get(signum)
        if os.getpid() != self._pid:
            # A forked child (a DataLoader worker): behave as if there were no Checkpointer.
            if callable(previous):
                previous(signum, frame)
                return
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
            if previous in (None, signal.SIG_DFL):
                os.kill(os.getpid(), signum)
            return
        self._stop.set()
        # A handler installed before ours (a logger, another library's cleanup) still runs.
        # Python's default SIGINT handler raises KeyboardInterrupt, which would skip the save.
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)

    @property
    def stop_requested(self):
        """True once a signal asked the process to save and stop."""
        return self._stop.is_set()

    def request_stop(self):
        """Act as if SIGTERM had arrived: the next step() saves and exits."""
        self._stop.set()

    def close(self):
        """Puts back the signal handlers that were there before (done on `with` exit too)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous.items():
            if signal.getsignal(sig) == self._on_signal and previous is not None:
                signal.signal(sig, previous)
        self._previous = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- saving -------------------------------------------------------------------------------

    @property
    def directory(self):
        """The checkpoint folder (created on first use)."""
        if self._directory is None:
            self._directory = str(drover.checkpoint_dir())
        else:
            os.makedirs(self._directory, exist_ok=True)
        return self._directory

    def state(self, step):
        """The payload a save at `step` writes."""
        objects = {}
        for name, obj in self.objects.items():
            if isinstance(obj, (dict, list)):
                objects[name] = obj
            else:
                objects[name] = obj.state_dict()
        payload = {"drover_checkpoint": _FORMAT, "step": int(step), "time": time.time(),
                   "objects": objects}
        if self.rng:
            payload["rng"] = _rng_state()
        return payload

    def save_now(self, step=None):
        """Saves at once; `step` defaults to the last one given to step(). Returns the path.

        Prints ``{"drover_checkpoint": {"step": N, "path": NAME, "t": TIME}}`` after the save.
        On a rank other than 0 nothing is written and None is returned.
        """
        if step is None:
            step = self._last_step
        if step is None:
            raise ValueError("Checkpointer.save_now: give the step (no step() call yet)")
        step = int(step)
        if step < 0:
            raise ValueError("Checkpointer: a step must be >= 0, got %d" % step)
        self._since_save = 0
        if not self.writer:
            return None
        directory = self.directory
        name = "ckpt-%09d.pt" % step
        path = _write_atomically(directory, name, self.state(step))
        self._rotate(directory, step)
        self.last_saved_step = step
        self.last_saved_path = path
        _emit("drover_checkpoint", {"step": step, "path": name, "t": time.time()})
        return path

    def _rotate(self, directory, saved_step):
        # The newest `keep` at or below the step just saved stay. Those above it belong to a
        # history this run has left (it started over without resuming), and would otherwise be
        # what the next resume() picks.
        found = list_checkpoints(directory)
        older = [p for s, p in found if s <= saved_step]
        doomed = older[:-self.keep] + [p for s, p in found if s > saved_step]
        for path in doomed:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def step(self, step):
        """Call at the end of each training step (or epoch) with its number.

        Saves when `every` steps have passed since the last save, and when a signal asked for a
        stop; after that save the process exits with `exit_code` (143) via SystemExit, so
        ``finally`` blocks and atexit handlers run. Returns the path saved, or None.
        """
        self._last_step = int(step)
        self._since_save += 1
        path = None
        if self._stop.is_set() or (self.every and self._since_save >= self.every):
            path = self.save_now(step)
        if self._stop.is_set():
            self.exit()
        return path

    def exit(self):
        """Exits the process with `exit_code` (flushing stdout first)."""
        try:
            sys.stdout.flush()
        finally:
            raise SystemExit(self.exit_code)

    # -- resuming -----------------------------------------------------------------------------

    def resume(self, start=0):
        """Loads the newest readable checkpoint; returns the step to continue from.

        That is the saved step + 1, or `start` when there is no checkpoint. Prints
        ``{"drover_resume": {"step": N}}`` (N the saved step) when it loaded one. A checkpoint
        that cannot be read is renamed ``*.corrupt`` and the one before it is tried.
        """
        directory = self.directory
        for name in os.listdir(directory):
            if _TEMP.match(name):  # a save that was killed midway
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass
        for step, path in reversed(list_checkpoints(directory)):
            try:
                payload = _load_file(path)
                if not isinstance(payload, dict) or "objects" not in payload:
                    raise ValueError("not a drover checkpoint")
            except Exception as e:
                _warn("cannot read %s (%s: %s); trying the one before"
                      % (path, type(e).__name__, e))
                try:
                    os.replace(path, path + ".corrupt")
                except OSError:
                    pass
                continue
            self.restore(payload)
            step = int(payload.get("step", step))
            self._last_step = step
            self._since_save = 0
            self.last_saved_step = step
            self.last_saved_path = path
            if self.writer:
                _emit("drover_resume", {"step": step})
            return step + 1
        return start

    def restore(self, payload):
        """Puts a loaded payload's state back into the objects (and the RNGs)."""
        self.loaded = payload
        saved = payload.get("objects", {})
        for name, obj in self.objects.items():
            if name not in saved:
                _warn("the checkpoint has no state for %r; it starts fresh" % name)
                continue
            state = saved[name]
            if isinstance(obj, dict):
                obj.clear()
                obj.update(state)
            elif isinstance(obj, list):
                obj[:] = state
            else:
                obj.load_state_dict(state)
        if self.rng and "rng" in payload:
            _set_rng_state(payload["rng"])
