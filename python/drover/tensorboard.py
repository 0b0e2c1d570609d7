"""A TensorBoard ``SummaryWriter`` for scalars, standard library only.

Where the ``tensorboard`` package is missing (Debian has none, so
``torch.utils.tensorboard`` cannot be imported there), swap one import::

    from drover.tensorboard import SummaryWriter    # for: from torch.utils.tensorboard import ...

    writer = SummaryWriter("runs/x")                 # default: runs/<date>_<host><comment>
    for step in range(100):
        writer.add_scalar("train/loss", loss, step)
        writer.add_scalars("lr", {"encoder": lr_e, "decoder": lr_d}, step)
    writer.add_hparams({"lr": 0.01, "batch_size": 32}, {"hparam/val_acc": acc})
    writer.close()

It writes real TensorBoard event files (``events.out.tfevents.<time>.<host>.<pid>.<n><suffix>``:
TFRecord framing with masked CRC-32Cs, ``Event`` protos with ``simple_value`` scalars stored as
float32, TensorBoard's own field numbers), so ``tensorboard --logdir runs`` shows them and drover
reads them as the run's metrics. Scalars only: ``add_scalar``, ``add_scalars`` and
``add_hparams``; the other ``add_*`` calls of torch's writer (histograms, images, text, graphs,
...) are accepted, write nothing and warn once each. Values may be ints, floats, numpy scalars
or one-element torch tensors (``.item()`` is called; neither numpy nor torch is imported).

Events are queued and written when ``max_queue`` are waiting, when ``flush_secs`` have passed
(a background thread sees to it even when no call comes), on ``flush()``, ``close()`` and at
interpreter exit; the file stays open between writes.
"""

import atexit
import itertools
import math
import os
import socket
import struct
import threading
import time
import warnings
from datetime import datetime

__all__ = ["SummaryWriter", "crc32c", "masked_crc32c"]


# --- CRC-32C (Castagnoli), as TFRecord frames use it -------------------------------------------

def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC_TABLE = _crc_table()


def crc32c(data):
    """CRC-32C of `data` (bytes-like)."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    """The masked CRC-32C a TFRecord frame stores (a CRC of CRCs would be weak otherwise)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(data):
    """One TFRecord frame: uint64 length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return b"".join((length, struct.pack("<I", masked_crc32c(length)), data,
                     struct.pack("<I", masked_crc32c(data))))


# --- protobuf encoding (field numbers: TensorBoard's event.proto, summary.proto, tensor.proto,
# plugins/hparams/api.proto and plugin_data.proto; google/protobuf/struct.proto) ---------------

def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _uint(field, n):  # varint field; negative int64 as its 64-bit two's complement
    return _varint(field << 3) + _varint(n & 0xFFFFFFFFFFFFFFFF)


def _double(field, x):
    return _varint(field << 3 | 1) + struct.pack("<d", x)


def _float32_bytes(x):
    try:
        return struct.pack("<f", x)
    except OverflowError:  # beyond float32's range: infinite, as a C cast makes it
        return struct.pack("<f", math.copysign(math.inf, x))


def _float(field, x):
    return _varint(field << 3 | 5) + _float32_bytes(x)


def _bytes(field, data):
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _text(field, text):
    return _bytes(field, text.encode("utf-8"))


def _event(wall_time, step=0, file_version=None, summary=None, session_log=None):
    # Event: wall_time 1, step 2, oneof {file_version 3, summary 5, session_log 7}.
    out = _double(1, wall_time)
    if step:
        out += _uint(2, step)
    if file_version is not None:
        out += _text(3, file_version)
    if summary is not None:
        out += _bytes(5, summary)
    if session_log is not None:
        out += _bytes(7, session_log)
    return out


def _summary(*values):
    # Summary: repeated Value value = 1.
    return b"".join(_bytes(1, v) for v in values)


def _plugin_metadata(plugin_name, content=b""):
    # SummaryMetadata: plugin_data 1 {plugin_name 1, content 2}.
    data = _text(1, plugin_name) + (_bytes(2, content) if content else b"")
    return _bytes(9, _bytes(1, data))  # Summary.Value.metadata = 9


def _scalar_value(tag, value):
    # Summary.Value: tag 1, simple_value 2 (a oneof member: written even when 0).
    return _text(1, tag) + _float(2, value)


def _tensor_scalar_value(tag, value, double_precision):
    # Summary.Value: tag 1, tensor 8 {dtype 1, tensor_shape 2 (a scalar: empty),
    # float_val 5 / double_val 6 (packed)}, metadata 9 of the scalars plugin.
    if double_precision:
        tensor = _uint(1, 2) + _bytes(2, b"") + _bytes(6, struct.pack("<d", value))
    else:
        tensor = _uint(1, 1) + _bytes(2, b"") + _bytes(5, _float32_bytes(value))
    return _text(1, tag) + _bytes(8, tensor) + _plugin_metadata("scalars")


# --- values -------------------------------------------------------------------------------------

def _number(value, what):
    """A scalar as a Python float: ints, floats, numpy scalars, one-element arrays and tensors."""
    if isinstance(value, (str, bytes)):
        raise TypeError("drover.tensorboard: %s %r is a string, not a number" % (what, value))
    if not isinstance(value, (int, float)):
        item = getattr(value, "item", None)
        if callable(item):
            try:
                value = item()
            except Exception as e:  # a tensor of several elements
                raise ValueError("drover.tensorboard: %s must be one number, got %s"
                                 % (what, type(value).__name__)) from e
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError("drover.tensorboard: %s %r is not a number" % (what, value)) from None


def _step(step):
    if step is None:
        return 0
    if not isinstance(step, int):
        item = getattr(step, "item", None)
        step = int(item() if callable(item) else step)
    if not -(1 << 63) <= step < (1 << 63):
        raise ValueError("drover.tensorboard: global_step %d does not fit in 64 bits" % step)
    return step


def _wall_time(walltime):
    return time.time() if walltime is None else float(walltime)


def _tag(tag):
    if not isinstance(tag, str):
        raise TypeError("drover.tensorboard: a tag is a string, got %r" % (tag,))
    return tag


# --- event files --------------------------------------------------------------------------------

_file_numbers = itertools.count()  # the <n> of file names, as TensorBoard's writer counts
_open_files = set()  # until closed: a writer dropped unclosed is still flushed on time and at exit
_open_files_lock = threading.Lock()
_flusher_pid = None


def _watch(event_file):
    """Registers an open file with the thread that flushes every writer's queue on time."""
    global _flusher_pid
    with _open_files_lock:
        _open_files.add(event_file)
        if _flusher_pid != os.getpid():  # none yet, or the parent's (after a fork)
            _flusher_pid = os.getpid()
            threading.Thread(target=_flush_on_time, name="drover-tensorboard-flush",
                             daemon=True).start()


def _flush_on_time():
    while True:
        with _open_files_lock:
            files = list(_open_files)
        pause = 1.0
        now = time.monotonic()
        for f in files:
            pause = min(pause, f.flush_if_due(now))
        del files
        time.sleep(max(0.02, pause))


def _after_fork_in_child():
    # The files a forked child inherits are its parent's: it neither flushes them on time nor at
    # exit (what it adds to them is dropped), and no lock of theirs is left held by a thread
    # that does not exist in the child.
    global _open_files_lock, _flusher_pid
    _open_files_lock = threading.Lock()
    for f in list(_open_files):
        f._lock = threading.Lock()
    _open_files.clear()
    _flusher_pid = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _flush_at_exit():
    with _open_files_lock:
        files = list(_open_files)
    for f in files:
        f.flush()


class _EventFile:
    """One event file: created with its file_version event, written in batches, kept open."""

    def __init__(self, log_dir, max_queue, flush_secs, filename_suffix):
        self.log_dir = log_dir
        os.makedirs(log_dir, exist_ok=True)
        name = "events.out.tfevents.%010d.%s.%d.%d%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(_file_numbers), filename_suffix)
        self.path = os.path.join(log_dir, name)
        self._file = open(self.path, "wb")
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._queue = []
        self._max_queue = max(1, int(max_queue))
        self._flush_secs = float(flush_secs)
        self._last_write = time.monotonic()
        self._closed = False
        self.add(_event(time.time(), file_version="brain.Event:2"))
        self.flush()
        _watch(self)

    def add(self, event):
        frame = _record(event)
        with self._lock:
            if self._closed:
                return
            self._queue.append(frame)
            if (len(self._queue) >= self._max_queue
                    or time.monotonic() - self._last_write >= self._flush_secs):
                self._write()

    def _write(self):  # holding the lock
        queue, self._queue = self._queue, []
        self._last_write = time.monotonic()
        if self._closed or self._pid != os.getpid():
            return  # a forked child's copy: what it queued is not its to write
        if queue:
            self._file.write(b"".join(queue))
        self._file.flush()

    def flush(self):
        with self._lock:
            self._write()

    def flush_if_due(self, now):
        """Writes the queue when it has waited flush_secs; returns the seconds to the next look."""
        with self._lock:
            if not self._queue:
                return self._flush_secs
            due = self._last_write + self._flush_secs - now
            if due > 0:
                return due
            self._write()
            return self._flush_secs

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._write()
            self._closed = True
            if self._pid == os.getpid():
                self._file.close()
        with _open_files_lock:
            _open_files.discard(self)


# --- the writer ---------------------------------------------------------------------------------

_DROPPED = ("add_histogram", "add_histogram_raw", "add_image", "add_images",
            "add_image_with_boxes", "add_figure", "add_video", "add_audio", "add_text",
            "add_graph", "add_onnx_graph", "add_embedding", "add_pr_curve", "add_pr_curve_raw",
            "add_custom_scalars", "add_custom_scalars_multilinechart",
            "add_custom_scalars_marginchart", "add_mesh")


class SummaryWriter:
    """Writes scalars to TensorBoard event files in `log_dir`, as
    ``torch.utils.tensorboard.SummaryWriter`` does.

    `log_dir` defaults to ``runs/<Mon><day>_<HH-MM-SS>_<hostname><comment>``. `purge_step` writes
    TensorBoard's restart marker at that step (TensorBoard then hides the events of earlier
    files at or after it). Events are written when `max_queue` are waiting or `flush_secs` have
    passed; `filename_suffix` ends every event file's name.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self._files = None  # folder -> _EventFile; None once closed (reopened on the next add)
        self._main_file()

    def _file_in(self, folder):
        f = self._files.get(folder)
        if f is None:
            f = _EventFile(folder, self.max_queue, self.flush_secs, self.filename_suffix)
            self._files[folder] = f
        return f

    def _main_file(self):
        if self._files is None:
            self._files = {}
            main = self._file_in(os.fspath(self.log_dir))
            if self.purge_step is not None:
                step = _step(self.purge_step)
                now = time.time()
                main.add(_event(now, step, file_version="brain.Event:2"))
                main.add(_event(now, step, session_log=_uint(1, 1)))  # SessionLog{status: START}
                self.purge_step = None
            return main
        return self._files[os.fspath(self.log_dir)]

    def get_logdir(self):
        """The folder the event files are written to."""
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One point of the curve `tag`. NaN and infinities are kept; values are float32 on disk
        (``new_style=True``: a tensor of the scalars plugin instead, float64 with
        ``double_precision=True``)."""
        tag = _tag(tag)
        value = _number(scalar_value, "scalar_value of %r" % tag)
        if new_style:
            encoded = _tensor_scalar_value(tag, value, double_precision)
        else:
            encoded = _scalar_value(tag, value)
        self._main_file().add(_event(_wall_time(walltime), _step(global_step),
                                     summary=_summary(encoded)))

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several curves in one chart: each ``tag: value`` of the dict goes to its own folder
        ``<log_dir>/<main_tag>_<tag>`` (``/`` in main_tag made ``_``), under the tag `main_tag`."""
        main_tag = _tag(main_tag)
        wall_time = _wall_time(walltime)
        step = _step(global_step)
        base = os.fspath(self._main_file().log_dir)
        events = []
        for tag, value in tag_scalar_dict.items():
            value = _number(value, "the value of %r" % (tag,))
            folder = base + "/" + main_tag.replace("/", "_") + "_" + str(tag)
            events.append((folder, _event(wall_time, step,
                                          summary=_summary(_scalar_value(main_tag, value)))))
        for folder, event in events:
            self._file_in(folder).add(event)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """A session of TensorBoard's HParams plugin in ``<log_dir>/<run_name>`` (default: the
        time): the hyper-parameters and the metrics' names, and each metric of `metric_dict` as
        a scalar there. Under drover the hyper-parameters are also recorded as
        ``drover.log_hparams(hparam_dict)`` does."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        summaries = _hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete or {})
        metrics = [(_tag(k), _number(v, "metric %r" % (k,))) for k, v in metric_dict.items()]
        if not run_name:
            run_name = str(time.time())
        folder = os.path.join(os.fspath(self._main_file().log_dir), run_name)
        step = _step(global_step)
        with SummaryWriter(log_dir=folder) as w:
            f = w._main_file()
            now = time.time()
            for s in summaries:
                f.add(_event(now, step, summary=s))
            for tag, value in metrics:
                w.add_scalar(tag, value, step)
        import drover

        if drover.inside_drover():
            drover.log_hparams({k: _plain(v) for k, v in hparam_dict.items()})

    def flush(self):
        """Writes every queued event to disk."""
        if self._files is None:
            return
        for f in self._files.values():
            f.flush()

    def close(self):
        """Writes what is queued and closes the files; a later add_* starts new files."""
        if self._files is None:
            return
        for f in self._files.values():
            f.close()
        self._files = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()


def _dropped(name):
    warned = []

    def method(self, *args, **kwargs):
        if not warned:
            warned.append(True)
            warnings.warn("drover.tensorboard.SummaryWriter writes scalars only: %s writes "
                          "nothing" % name, stacklevel=2)

    method.__name__ = name
    method.__doc__ = "Accepted for torch's SummaryWriter's sake; writes nothing (scalars only)."
    return method


for _name in _DROPPED:
    setattr(SummaryWriter, _name, _dropped(_name))
del _name


# --- TensorBoard's HParams plugin ---------------------------------------------------------------

def _struct_value(v):
    # google.protobuf.Value: number_value 2, string_value 3, bool_value 4 (a oneof: always written).
    if isinstance(v, bool):
        return _uint(4, int(v))
    if isinstance(v, str):
        return _text(3, v)
    return _double(2, float(v))


def _plain(v):
    """A hyper-parameter as drover.log_hparams gets it: a tensor or numpy scalar as its number."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:
            pass
    return v


def _hparam(k, v):
    """(value, DataType) of one hyper-parameter, as torch's writer takes them; None: left out."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v, 2  # DATA_TYPE_BOOL
    if isinstance(v, (int, float)):
        return float(v), 3  # DATA_TYPE_FLOAT64
    if isinstance(v, str):
        return v, 1  # DATA_TYPE_STRING
    item = getattr(v, "item", None)
    if callable(item):
        try:
            value = item()
        except Exception:
            value = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value), 3
        if isinstance(value, bool):
            return value, 2
    raise ValueError("value should be one of int, float, str, bool, or torch.Tensor "
                     "(hparam %r is %s)" % (k, type(v).__name__))


def _hparams_summaries(hparam_dict, metric_dict, domain_discrete):
    """The experiment, session start and session end summaries of TensorBoard's HParams plugin."""
    if not isinstance(domain_discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in domain_discrete.items():
        if (k not in hparam_dict or not isinstance(v, list)
                or not all(isinstance(d, type(hparam_dict[k])) for d in v)):
            raise TypeError("parameter: hparam_domain_discrete[{}] should be a list of same type "
                            "as hparam_dict[{}].".format(k, k))
    infos = []
    start = b""
    for k, v in hparam_dict.items():
        k = _tag(k)
        typed = _hparam(k, v)
        if typed is None:
            continue
        value, data_type = typed
        # SessionStartInfo.hparams = 1: map<string, Value>, entries {key 1, value 2}.
        start += _bytes(1, _text(1, k) + _bytes(2, _struct_value(value)))
        # HParamInfo: name 1, type 4, domain_discrete 5 (ListValue: repeated Value values = 1).
        info = _text(1, k) + _uint(4, data_type)
        if k in domain_discrete:
            info += _bytes(5, b"".join(_bytes(1, _struct_value(d)) for d in domain_discrete[k]))
        infos.append(info)
    # Experiment: hparam_infos 4, metric_infos 5 (MetricInfo: name 1 = MetricName{tag 2}).
    experiment = b"".join(_bytes(4, i) for i in infos)
    experiment += b"".join(_bytes(5, _bytes(1, _text(2, _tag(k)))) for k in metric_dict)
    end = _uint(1, 1)  # SessionEndInfo.status = STATUS_SUCCESS
    # HParamsPluginData: version 1 (0: left out), experiment 2, session_start_info 3,
    # session_end_info 4. The values carry only metadata, as torch's writer makes them.
    out = []
    for tag, field, body in (("_hparams_/experiment", 2, experiment),
                             ("_hparams_/session_start_info", 3, start),
                             ("_hparams_/session_end_info", 4, end)):
        content = _bytes(field, body)
        out.append(_summary(_text(1, tag) + _plugin_metadata("hparams", content)))
    return out
