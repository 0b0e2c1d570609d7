"""drover.tensorboard.SummaryWriter: the event files it writes, read back by a reader of the
test's own (TFRecord framing with both CRC-32Cs checked, protobuf decoded by hand), and, when
DROVER_BIN names drover's binary, a run through drover that stores its scalars and lays them out
again with `drover tensorboard`."""

import json
import math
import os
import pathlib
import re
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import warnings
from unittest import mock

from drover import tensorboard
from drover.tensorboard import SummaryWriter

from capture import Captured  # noqa: E402  (python/tests is on the path)

HERE = pathlib.Path(__file__).resolve().parent
PYTHON_DIR = str(HERE.parent)


# --- an independent reader ----------------------------------------------------------------------

def crc32c_bitwise(data):
    """CRC-32C bit by bit (no table), to check the writer's table-driven one."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    """The data of each TFRecord frame of a file; every length and data CRC checked, nothing left
    over at the end."""
    data = pathlib.Path(path).read_bytes()
    records, pos = [], 0
    while pos < len(data):
        assert pos + 12 <= len(data), "torn header at %d in %s" % (pos, path)
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert length_crc == masked(crc32c_bitwise(header)), "length CRC at %d" % pos
        body = data[pos + 12:pos + 12 + length]
        assert len(body) == length, "torn record at %d" % pos
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert data_crc == masked(crc32c_bitwise(body)), "data CRC at %d" % pos
        records.append(body)
        pos += 16 + length
    return records


def varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def fields(data):
    """A protobuf message as {field number: [raw values]} (varints as ints, the rest as bytes)."""
    out, pos = {}, 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        elif wire == 2:
            length, pos = varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
            assert len(value) == length, "truncated field %d" % number
        else:
            raise AssertionError("wire type %d" % wire)
        out.setdefault(number, []).append(value)
    assert pos == len(data)
    return out


def int64(n):
    return n - (1 << 64) if n >= 1 << 63 else n


def decode_value(data):
    # Summary.Value: tag 1, simple_value 2, tensor 8,
    # metadata 9 {plugin_data 1 {plugin_name 1, content 2}}.
    f = fields(data)
    value = {"tag": f[1][0].decode("utf-8")}
    if 2 in f:
        value["simple_value"] = struct.unpack("<f", f[2][0])[0]
    if 8 in f:
        t = fields(f[8][0])
        value["dtype"] = t[1][0]
        value["shape"] = t.get(2, [b""])[0]
        if 5 in t:
            value["float_val"] = struct.unpack("<%df" % (len(t[5][0]) // 4), t[5][0])
        if 6 in t:
            value["double_val"] = struct.unpack("<%dd" % (len(t[6][0]) // 8), t[6][0])
    if 9 in f:
        plugin = fields(fields(f[9][0])[1][0])
        value["plugin"] = plugin[1][0].decode("utf-8")
        value["content"] = plugin.get(2, [b""])[0]
    return value


def decode_event(data):
    # Event: wall_time 1, step 2, file_version 3, summary 5 {value 1}, session_log 7 {status 1}.
    f = fields(data)
    event = {"wall_time": struct.unpack("<d", f[1][0])[0] if 1 in f else 0.0,
             "step": int64(f[2][0]) if 2 in f else 0}
    if 3 in f:
        event["file_version"] = f[3][0].decode("utf-8")
    if 5 in f:
        event["values"] = [decode_value(v) for v in fields(f[5][0]).get(1, [])]
    if 7 in f:
        event["session_log"] = fields(f[7][0]).get(1, [0])[0]
    return event


def read_events(path):
    return [decode_event(r) for r in read_records(path)]


def event_files(folder):
    return sorted(p for p in pathlib.Path(folder).rglob("events.out.tfevents.*") if p.is_file())


def scalars(folder):
    """{(folder relative to `folder`, tag): [(step, value, wall_time)]} of every simple_value."""
    found = {}
    for path in event_files(folder):
        events = read_events(path)
        assert events[0]["file_version"] == "brain.Event:2", path
        rel = str(path.parent.relative_to(folder))
        for e in events:
            for v in e.get("values", []):
                if "simple_value" in v:
                    found.setdefault((rel, v["tag"]), []).append(
                        (e["step"], v["simple_value"], e["wall_time"]))
    return found


def f32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


class Scalar:
    """What numpy scalars and 0-d torch tensors look like to the writer: .item()."""

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


# --- the writer ---------------------------------------------------------------------------------

class Crc32cTest(unittest.TestCase):
    def test_known_values(self):
        self.assertEqual(tensorboard.crc32c(b""), 0)
        self.assertEqual(tensorboard.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(tensorboard.crc32c(bytes(32)), 0x8A9136AA)  # RFC 3720, B.4
        self.assertEqual(tensorboard.crc32c(b"\xff" * 32), 0x62A8AB43)
        self.assertEqual(tensorboard.crc32c(bytes(range(32))), 0x46DD794E)
        for n in (1, 7, 100, 1000):
            data = os.urandom(n)
            self.assertEqual(tensorboard.crc32c(data), crc32c_bitwise(data))
            self.assertEqual(tensorboard.masked_crc32c(data), masked(crc32c_bitwise(data)))


class WriterTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = pathlib.Path(tmp.name)

    def test_scalars_read_back_exactly(self):
        log_dir = self.dir / "runs" / "x"
        points = {  # tag: [(step, value)]
            "train/loss": [(s, 1.0 / (s + 1)) for s in range(25)],
            "val/acc": [(0, 0.1), (10, 0.7), (20, 0.93)],
            "odd": [(-7, float("nan")), (2 ** 40, float("inf")), (2 ** 62, -math.inf),
                    (2 ** 63 - 1, 1e39), (-(2 ** 63), -1e-46), (5, 0.0), (6, -0.0),
                    (7, 3.4028235e38), (8, 1e-45)],
        }
        with SummaryWriter(log_dir, max_queue=4) as w:
            self.assertEqual(w.get_logdir(), log_dir)
            for tag, pts in points.items():
                for i, (step, value) in enumerate(pts):
                    # ints, floats and .item() scalars (numpy's, torch's) alike
                    given = Scalar(value) if i % 3 == 1 else value
                    w.add_scalar(tag, given, Scalar(step) if i % 3 == 2 else step)
            w.add_scalar("int", 7, 1)
            w.add_scalar("at", 2.5, 3, walltime=1700000000.125)
            w.add_scalar("nostep", 1.5)
            w.add_scalars("lr/groups", {"enc": 0.1, "dec": Scalar(0.2)}, 9, walltime=12.5)
            w.add_scalars("lr/groups", {"enc": 0.05, "dec": 0.1}, 10)
        found = scalars(log_dir)
        for tag, pts in points.items():
            got = found.pop((".", tag))
            self.assertEqual([p[0] for p in got], [s for s, _ in pts], tag)
            for (step, want), (_, value, _) in zip(pts, got):
                if math.isnan(want):
                    self.assertTrue(math.isnan(value), (tag, step))
                else:
                    self.assertEqual(value, f32(want), (tag, step))
                    self.assertEqual(math.copysign(1, value), math.copysign(1, want))
        self.assertEqual([p[:2] for p in found.pop((".", "int"))], [(1, 7.0)])
        self.assertEqual(found.pop((".", "at")), [(3, 2.5, 1700000000.125)])
        self.assertEqual([p[:2] for p in found.pop((".", "nostep"))], [(0, 1.5)])
        # add_scalars: one folder per key, the main tag as the tag, as torch writes them
        enc = found.pop(("lr_groups_enc", "lr/groups"))
        dec = found.pop(("lr_groups_dec", "lr/groups"))
        self.assertEqual([p[:2] for p in enc], [(9, f32(0.1)), (10, f32(0.05))])
        self.assertEqual([p[:2] for p in dec], [(9, f32(0.2)), (10, f32(0.1))])
        self.assertEqual([enc[0][2], dec[0][2]], [12.5, 12.5])
        self.assertEqual(enc[1][2], dec[1][2])  # one wall time for the call
        self.assertEqual(found, {})

    def test_file_names_and_the_first_event(self):
        before = time.time()
        with SummaryWriter(self.dir / "a", filename_suffix=".v1") as w:
            w.add_scalar("x", 1.0, 1)
            w.add_scalars("m", {"k": 2.0}, 1)
        files = event_files(self.dir / "a")
        self.assertEqual(len(files), 2)
        pattern = r"events\.out\.tfevents\.(\d{10})\.%s\.%d\.(\d+)\.v1" % (
            re.escape(socket.gethostname()), os.getpid())
        numbers = []
        for path in files:
            m = re.fullmatch(pattern, path.name)
            self.assertIsNotNone(m, path.name)
            self.assertLessEqual(abs(int(m.group(1)) - before), 2)
            numbers.append(int(m.group(2)))
            first = read_events(path)[0]
            self.assertEqual(first["file_version"], "brain.Event:2")
            self.assertNotIn("values", first)
            self.assertLessEqual(abs(first["wall_time"] - before), 2)
        self.assertEqual(len(set(numbers)), 2)  # two files of one process: two numbers

    def test_default_log_dir_is_runs_date_host_comment(self):
        cwd = os.getcwd()
        os.chdir(self.dir)
        self.addCleanup(os.chdir, cwd)
        with SummaryWriter(comment="_lr0.1") as w:
            w.add_scalar("x", 1.0, 0)
            logdir = w.get_logdir()
        self.assertRegex(logdir, r"^runs/[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_%s_lr0\.1$"
                         % re.escape(socket.gethostname()))
        self.assertEqual(len(event_files(self.dir / logdir)), 1)

    def test_the_queue_is_bounded_and_the_file_stays_open(self):
        w = SummaryWriter(self.dir, max_queue=3, flush_secs=3600)
        self.addCleanup(w.close)
        (path,) = event_files(self.dir)
        on_disk = lambda: len(read_records(path))  # noqa: E731
        self.assertEqual(on_disk(), 1)  # the file_version event is written at once
        w.add_scalar("x", 1.0, 1)
        w.add_scalar("x", 2.0, 2)
        self.assertEqual(on_disk(), 1)
        w.add_scalar("x", 3.0, 3)  # the third queued event writes the queue
        self.assertEqual(on_disk(), 4)
        w.add_scalar("x", 4.0, 4)
        self.assertEqual(on_disk(), 4)
        w.flush()
        self.assertEqual(on_disk(), 5)
        if os.path.isdir("/proc/self/fd"):
            self.assertIn(str(path), open_files())
        w.close()
        self.assertEqual(on_disk(), 5)
        if os.path.isdir("/proc/self/fd"):
            self.assertNotIn(str(path), open_files())
        self.assertEqual(event_files(self.dir), [path])

    def test_flush_secs_writes_without_another_call(self):
        w = SummaryWriter(self.dir, max_queue=1000, flush_secs=0.2)
        self.addCleanup(w.close)
        (path,) = event_files(self.dir)
        w.add_scalar("x", 1.0, 1)
        deadline = time.monotonic() + 10
        while len(read_records(path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(len(read_records(path)), 2)

    def test_unclosed_writers_are_flushed_at_exit(self):
        script = textwrap.dedent("""
            import sys
            from drover.tensorboard import SummaryWriter
            w = SummaryWriter(sys.argv[1], max_queue=100)
            for step in range(5):
                w.add_scalar("x", step * 0.5, step)
            print("numpy" in sys.modules, "torch" in sys.modules)
        """)
        p = subprocess.run([sys.executable, "-c", script, str(self.dir)], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["False", "False"])  # neither is imported
        self.assertEqual([p[:2] for p in scalars(self.dir)[(".", "x")]],
                         [(s, s * 0.5) for s in range(5)])

    def test_a_closed_writer_writes_a_new_file_on_the_next_add(self):
        w = SummaryWriter(self.dir)
        w.add_scalar("x", 1.0, 1)
        w.close()
        w.close()  # a second close does nothing
        w.add_scalar("x", 2.0, 2)
        w.close()
        files = event_files(self.dir)
        self.assertEqual(len(files), 2)
        self.assertEqual([[(e["step"], e["values"][0]["simple_value"]) for e in read_events(f)
                           if "values" in e] for f in files], [[(1, 1.0)], [(2, 2.0)]])

    def test_purge_step_writes_tensorboards_restart_marker(self):
        with SummaryWriter(self.dir, purge_step=40) as w:
            w.add_scalar("x", 1.0, 40)
        events = read_events(event_files(self.dir)[0])
        self.assertEqual(events[0]["file_version"], "brain.Event:2")
        self.assertEqual((events[1]["step"], events[1]["file_version"]), (40, "brain.Event:2"))
        self.assertEqual((events[2]["step"], events[2]["session_log"]), (40, 1))  # START
        self.assertEqual(events[3]["values"][0]["tag"], "x")

    def test_new_style_scalars_are_tensors_of_the_scalars_plugin(self):
        with SummaryWriter(self.dir) as w:
            w.add_scalar("f", 0.1, 1, new_style=True)
            w.add_scalar("d", 0.1, 2, new_style=True, double_precision=True)
        values = [e["values"][0] for e in read_events(event_files(self.dir)[0])[1:]]
        self.assertEqual([(v["tag"], v["dtype"], v["shape"], v["plugin"]) for v in values],
                         [("f", 1, b"", "scalars"), ("d", 2, b"", "scalars")])
        self.assertEqual(values[0]["float_val"], (f32(0.1),))
        self.assertEqual(values[1]["double_val"], (0.1,))

    def test_bad_values_are_refused(self):
        with SummaryWriter(self.dir) as w:
            with self.assertRaises(TypeError):
                w.add_scalar("x", "high", 1)
            with self.assertRaises(TypeError):
                w.add_scalar("x", None, 1)
            with self.assertRaises(TypeError):
                w.add_scalar(3, 1.0, 1)
            with self.assertRaises(ValueError):
                w.add_scalar("x", 1.0, 2 ** 63)
            with self.assertRaises(TypeError):
                w.add_scalars("m", {"a": 1.0, "b": "x"}, 1)  # nothing of the call is written
        self.assertEqual(scalars(self.dir), {})
        self.assertEqual(event_files(self.dir / "m_a"), [])

    def test_other_add_calls_write_nothing_and_warn(self):
        with SummaryWriter(self.dir) as w:
            with self.assertWarns(UserWarning):
                w.add_histogram("h", [1, 2, 3], 1)
            with self.assertWarns(UserWarning):
                w.add_text("t", "hello", 1)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                w.add_histogram("h", [1, 2, 3], 2)  # once per method
        self.assertEqual(len(read_events(event_files(self.dir)[0])), 1)

    @unittest.skipUnless(hasattr(os, "fork"), "no fork")
    def test_a_forked_child_does_not_write_into_its_parents_file(self):
        w = SummaryWriter(self.dir / "parent", max_queue=1)
        w.add_scalar("parent", 1.0, 1)
        pid = os.fork()
        if pid == 0:  # the child: its adds to the parent's writer are dropped; its own work
            code = 1
            try:
                w.add_scalar("child", 2.0, 2)
                w.flush()
                with SummaryWriter(self.dir / "child") as c:
                    c.add_scalar("mine", 3.0, 3)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        w.add_scalar("parent", 4.0, 4)
        w.close()
        self.assertEqual({k: [p[:2] for p in v] for k, v in scalars(self.dir).items()},
                         {("parent", "parent"): [(1, 1.0), (4, 4.0)],
                          ("child", "mine"): [(3, 3.0)]})

    def test_numpy_and_torch_scalars(self):
        try:
            import numpy
        except ImportError:
            numpy = None
        try:
            import torch
        except ImportError:
            torch = None
        if numpy is None and torch is None:
            self.skipTest("neither numpy nor torch is installed")
        with SummaryWriter(self.dir) as w:
            if numpy is not None:
                w.add_scalar("np", numpy.float32(0.25), numpy.int64(3))
                w.add_scalar("np", numpy.float64(0.1), numpy.int32(4))
                w.add_scalar("np", numpy.array([0.5]), 5)
            if torch is not None:
                w.add_scalar("pt", torch.tensor(0.75), torch.tensor(6))
                w.add_scalar("pt", torch.tensor([1.25], dtype=torch.float64), 7)
                with self.assertRaises(ValueError):
                    w.add_scalar("pt", torch.tensor([1.0, 2.0]), 8)
        found = {k[1]: [p[:2] for p in v] for k, v in scalars(self.dir).items()}
        if numpy is not None:
            self.assertEqual(found["np"], [(3, 0.25), (4, f32(0.1)), (5, 0.5)])
        if torch is not None:
            self.assertEqual(found["pt"], [(6, 0.75), (7, 1.25)])


def open_files():
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink("/proc/self/fd/" + fd))
        except OSError:
            pass
    return out


class HparamsTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = pathlib.Path(tmp.name)

    def hparams_run(self, run_name="trial"):
        with SummaryWriter(self.dir) as w:
            w.add_hparams({"lr": 0.01, "layers": 3, "opt": "adam", "amp": False, "none": None,
                           "t": Scalar(0.5)},
                          {"hparam/acc": 0.875, "hparam/loss": Scalar(0.25)},
                          hparam_domain_discrete={"opt": ["adam", "sgd"]}, run_name=run_name)

    def test_the_plugin_summaries_and_the_metrics(self):
        with Captured() as out, mock.patch.dict(os.environ):
            os.environ.pop("DROVER_RUN_ID", None)
            self.hparams_run()
        self.assertEqual(out.lines(), [])  # outside drover nothing is printed
        (path,) = event_files(self.dir / "trial")
        events = read_events(path)
        plugin = [e["values"][0] for e in events[1:4]]
        self.assertEqual([(v["tag"], v["plugin"], "simple_value" in v) for v in plugin],
                         [("_hparams_/experiment", "hparams", False),
                          ("_hparams_/session_start_info", "hparams", False),
                          ("_hparams_/session_end_info", "hparams", False)])
        # HParamsPluginData: version 1 (0), experiment 2, session_start_info 3, session_end_info 4
        data = [fields(v["content"]) for v in plugin]
        self.assertEqual([sorted(d) for d in data], [[2], [3], [4]])
        # Experiment: hparam_infos 4 {name 1, type 4, domain_discrete 5}, metric_infos 5
        experiment = fields(data[0][2][0])
        infos = [fields(i) for i in experiment[4]]
        self.assertEqual([(i[1][0].decode(), i[4][0]) for i in infos],
                         [("lr", 3), ("layers", 3), ("opt", 1), ("amp", 2), ("t", 3)])
        domain = [fields(v)[3][0].decode() for v in fields(infos[2][5][0])[1]]
        self.assertEqual(domain, ["adam", "sgd"])
        metric_tags = [fields(fields(m)[1][0])[2][0].decode() for m in experiment[5]]
        self.assertEqual(metric_tags, ["hparam/acc", "hparam/loss"])
        # SessionStartInfo: hparams 1 = map entries {key 1, value 2 (google.protobuf.Value)}
        start = {}
        for entry in fields(data[1][3][0])[1]:
            e = fields(entry)
            v = fields(e[2][0])
            if 2 in v:
                start[e[1][0].decode()] = struct.unpack("<d", v[2][0])[0]
            elif 3 in v:
                start[e[1][0].decode()] = v[3][0].decode()
            else:
                start[e[1][0].decode()] = bool(v[4][0])
        self.assertEqual(start, {"lr": 0.01, "layers": 3.0, "opt": "adam", "amp": False,
                                 "t": 0.5})
        self.assertEqual(fields(data[2][4][0]), {1: [1]})  # STATUS_SUCCESS
        self.assertEqual({k[1]: [p[:2] for p in v] for k, v in scalars(self.dir).items()},
                         {"hparam/acc": [(0, 0.875)], "hparam/loss": [(0, 0.25)]})

    def test_under_drover_the_hparams_are_logged_for_drover_too(self):
        with Captured() as out, mock.patch.dict(os.environ, {"DROVER_RUN_ID": "12"}):
            self.hparams_run()
        self.assertEqual(out.lines(), [{"drover_hparams": {
            "lr": 0.01, "layers": 3, "opt": "adam", "amp": False, "none": None, "t": 0.5}}])

    def test_bad_arguments_write_nothing(self):
        with SummaryWriter(self.dir) as w:
            with self.assertRaises(TypeError):
                w.add_hparams([("lr", 0.1)], {})
            with self.assertRaises(ValueError):
                w.add_hparams({"sizes": (1, 2)}, {"acc": 1.0}, run_name="a")
            with self.assertRaises(TypeError):
                w.add_hparams({"opt": "adam"}, {}, hparam_domain_discrete={"opt": [1, 2]},
                              run_name="b")
        self.assertEqual(sorted(p.name for p in self.dir.iterdir() if p.is_dir()), [])


# --- through drover -----------------------------------------------------------------------------

SCRIPT = """\
from drover.tensorboard import SummaryWriter

with SummaryWriter("runs/x") as w:
    for step in range(6):
        w.add_scalar("train/acc", 0.1 * step, step, walltime=1700000000.25 + step)
    w.add_scalar("val/err", 1.0 / 3.0, 5)
    w.add_scalar("odd", float("inf"), 2 ** 40)
    w.add_scalar("odd", float("-inf"), 2 ** 40 + 1)
    w.add_scalar("odd", float("nan"), 2 ** 52)
    w.add_scalars("lr", {"enc": 0.003}, 5)
    w.add_hparams({"lr": 0.01, "opt": "adam"}, {"hparam/acc": 0.7}, run_name="hp")
"""

EXPECTED = {  # name: {step: value}
    "train/acc": {s: 0.1 * s for s in range(6)},
    "val/err": {5: 1.0 / 3.0},
    "odd": {2 ** 40: math.inf, 2 ** 40 + 1: -math.inf, 2 ** 52: math.nan},
    "lr": {5: 0.003},
    "hparam/acc": {0: 0.7},
}


def same32(a, b):
    a = math.nan if a is None else a  # SQLite keeps NaN as NULL
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return f32(a) == f32(b)


@unittest.skipUnless(os.environ.get("DROVER_BIN"),
                     "DROVER_BIN is not set (the drover binary, e.g. build/drover; "
                     "ctest sets it)")
class ThroughDroverTest(unittest.TestCase):
    def run_drover(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
        env["PYTHONPATH"] = PYTHON_DIR + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                          else "")
        p = subprocess.run([os.environ["DROVER_BIN"], *args, "--store", str(self.store)],
                           cwd=self.dir, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, "drover %s: %s%s" % (args[0], p.stdout, p.stderr))
        return p.stdout

    def check(self, points, what):
        """points: {name: {step: value}} read back; each equal to what was written."""
        self.assertEqual(sorted(points), sorted(EXPECTED), what)
        for name, want in EXPECTED.items():
            self.assertEqual(sorted(points[name]), sorted(want), (what, name))
            for step, value in want.items():
                self.assertTrue(same32(points[name][step], value),
                                (what, name, step, points[name][step], value))

    def test_scalars_go_through_drover_and_back_to_event_files(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = pathlib.Path(tmp.name)
        self.store = self.dir / "store"
        project = self.dir / "project"
        project.mkdir()
        (project / "train.py").write_text(SCRIPT)
        (project / "spec.yaml").write_text(
            "name: tb-writer\ncommand: %s\nresources: {gpus: 0}\n"
            % json.dumps([sys.executable, "train.py"]))
        self.run_drover("run", str(project / "spec.yaml"), "--foreground", "--quiet")

        # What drover stored: every point, from its store.
        db = sqlite3.connect("file:%s?mode=ro" % (self.store / "drover.db"), uri=True)
        self.addCleanup(db.close)
        stored, times = {}, {}
        for step, name, value, t_ms in db.execute(
                "SELECT step, name, value, t_ms FROM metrics ORDER BY name, step"):
            self.assertNotIn(step, stored.get(name, {}), name)  # one point per step
            stored.setdefault(name, {})[step] = value
            times[(name, step)] = t_ms
        self.check(stored, "stored")
        for step in range(6):  # the event's wall time is the point's time
            self.assertEqual(times[("train/acc", step)], 1700000000250 + 1000 * step)

        # The hyper-parameters, as drover.log_hparams records them.
        run = json.loads(self.run_drover("show", "1", "--json"))
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["attempt_list"][-1]["hparams"], {"lr": 0.01, "opt": "adam"})
        self.assertEqual(len(run["attempt_list"][-1]["event_files"]), 3)  # x, x/lr_enc, x/hp

        # drover tensorboard writes them again as event files, read by this test's reader.
        out = self.dir / "tb"
        self.run_drover("tensorboard", "tb-writer", "--out", str(out))
        exported = {}
        for (_, tag), pts in scalars(out).items():
            for step, value, wall_time in pts:
                self.assertNotIn(step, exported.get(tag, {}), tag)
                exported.setdefault(tag, {})[step] = value
                if tag == "train/acc":
                    self.assertEqual(wall_time, 1700000000.25 + step)
        self.check(exported, "drover tensorboard")


if __name__ == "__main__":
    unittest.main()
