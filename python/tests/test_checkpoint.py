"""drover.Checkpointer: atomic saves, rotation, signals, RNG states, and a real training process
stopped by SIGTERM and resumed (run by CTest with /usr/bin/python3, torch from Debian)."""

import io
import json
import os
import pathlib
import pickle
import random
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

import drover
import drover.checkpoint
from drover.checkpoint import Checkpointer, list_checkpoints

HERE = pathlib.Path(__file__).resolve().parent
PYTHON_DIR = str(HERE.parent)

try:
    import numpy
except ImportError:  # pragma: no cover
    numpy = None
try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is installed by scripts/setup.sh
    torch = None


from capture import Captured  # noqa: E402  (python/tests is on the path)


class Stateful:
    """A torch-free object with state_dict()/load_state_dict()."""

    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


class Folder(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.made = []

    def tearDown(self):
        for c in reversed(self.made):  # each puts back the handler it found
            c.close()
        self._tmp.cleanup()

    def make(self, **kw):
        kw.setdefault("directory", self.dir)
        c = Checkpointer(**kw)
        self.made.append(c)
        return c

    def names(self):
        return sorted(os.listdir(self.dir))


class SaveTest(Folder):
    def test_save_writes_one_complete_file_and_one_line(self):
        state = Stateful(5)
        ckpt = self.make(model=state)
        with Captured() as out:
            before = time.time()
            path = ckpt.save_now(7)
        self.assertEqual(self.names(), ["ckpt-000000007.pt"])
        self.assertEqual(path, os.path.join(self.dir, "ckpt-000000007.pt"))
        (line,) = out.lines()
        self.assertEqual(list(line), ["drover_checkpoint"])
        body = line["drover_checkpoint"]
        self.assertEqual(sorted(body), ["path", "step", "t"])
        self.assertEqual(body["step"], 7)
        self.assertEqual(body["path"], "ckpt-000000007.pt")
        self.assertTrue(before <= body["t"] <= time.time())
        # The exact text: one line, no numeric top-level field.
        text = out.buf.getvalue()
        self.assertTrue(text.startswith('{"drover_checkpoint": {"step": 7, "path": '
                                        '"ckpt-000000007.pt", "t": '), text)
        self.assertTrue(text.endswith("}}\n"))
        # Readable permissions (the umask's, not mkstemp's 0600).
        mode = stat.S_IMODE(os.stat(path).st_mode)
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(mode, 0o666 & ~umask)

    def test_the_file_and_the_folder_are_fsynced_before_and_after_the_rename(self):
        events = []
        real_fsync, real_replace = os.fsync, os.replace

        def fsync(fd):
            events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
            return real_fsync(fd)

        def replace(a, b):
            events.append("replace")
            self.assertTrue(os.path.basename(a).startswith(".ckpt-000000003.pt."))
            self.assertEqual(os.path.dirname(a), self.dir)  # same folder: rename is atomic
            return real_replace(a, b)

        ckpt = self.make(extra={"a": 1})
        with Captured(), mock.patch("drover.checkpoint.os.fsync", fsync), \
                mock.patch("drover.checkpoint.os.replace", replace):
            ckpt.save_now(3)
        self.assertEqual(events, ["fsync-file", "replace", "fsync-dir"])

    def test_a_failed_save_leaves_the_previous_checkpoint_and_no_temporary_file(self):
        state = {"w": 1}
        ckpt = self.make(extra=state)
        with Captured():
            ckpt.save_now(1)
        state["w"] = 2
        with Captured() as out, mock.patch("drover.checkpoint.os.replace",
                                           side_effect=OSError(28, "No space left on device")):
            with self.assertRaises(OSError):
                ckpt.save_now(2)
        self.assertEqual(out.lines(), [])  # no line for a save that did not happen
        self.assertEqual(self.names(), ["ckpt-000000001.pt"])
        state["w"] = 99
        with Captured():
            self.assertEqual(self.make(extra=state).resume(), 2)
        self.assertEqual(state, {"w": 1})

    def test_keeps_the_latest_two(self):
        ckpt = self.make(extra={"x": 0}, every=1)
        with Captured() as out:
            for step in range(6):
                ckpt.step(step)
        self.assertEqual(self.names(), ["ckpt-000000004.pt", "ckpt-000000005.pt"])
        self.assertEqual([l["drover_checkpoint"]["step"] for l in out.lines()], list(range(6)))
        ckpt3 = self.make(extra={"x": 0}, every=1, keep=3)
        with Captured():
            for step in range(6, 10):
                ckpt3.step(step)
        self.assertEqual(self.names(), ["ckpt-000000007.pt", "ckpt-000000008.pt",
                                        "ckpt-000000009.pt"])

    def test_every_counts_steps_since_the_last_save(self):
        ckpt = self.make(extra={"x": 0}, every=25)
        with Captured() as out:
            for step in range(100):
                ckpt.step(step)
        self.assertEqual([l["drover_checkpoint"]["step"] for l in out.lines()], [24, 49, 74, 99])
        never = self.make(extra={"x": 0}, every=0, directory=os.path.join(self.dir, "n"))
        with Captured() as out:
            for step in range(50):
                self.assertIsNone(never.step(step))
        self.assertEqual(out.lines(), [])

    def test_a_fresh_start_removes_checkpoints_of_the_abandoned_history(self):
        with Captured():
            old = self.make(extra={"x": 0})
            for s in (40, 50):
                old.save_now(s)
            self.make(extra={"x": 1}).save_now(3)  # started over without resume()
        self.assertEqual(self.names(), ["ckpt-000000003.pt"])

    def test_plain_objects_are_restored_in_place(self):
        state, history, model = {"best": 0.5, "epoch": 3}, [1, 2, 3], Stateful(42)
        with Captured():
            self.make(extra=state, history=history, model=model).save_now(10)
        state2, history2, model2 = {"best": 0.0}, [], Stateful()
        ckpt = self.make(extra=state2, history=history2, model=model2)
        with Captured() as out:
            self.assertEqual(ckpt.resume(), 11)
        self.assertEqual(out.lines(), [{"drover_resume": {"step": 10}}])
        self.assertEqual(out.buf.getvalue(), '{"drover_resume": {"step": 10}}\n')
        self.assertEqual((state2, history2, model2.value), (state, history, 42))
        self.assertEqual(ckpt.loaded["step"], 10)

    def test_without_a_checkpoint_resume_returns_start_and_prints_nothing(self):
        ckpt = self.make(extra={})
        with Captured() as out:
            self.assertEqual(ckpt.resume(), 0)
            self.assertEqual(ckpt.resume(start=1), 1)
        self.assertEqual(out.lines(), [])

    def test_a_killed_save_and_a_corrupt_file_are_survived(self):
        with Captured():
            self.make(extra={"v": "good"}).save_now(4)
        bad = os.path.join(self.dir, "ckpt-000000005.pt")
        with open(bad, "wb") as f:
            f.write(b"\x80\x04 torn")
        temp = os.path.join(self.dir, ".ckpt-000000006.pt.1234.0a1b2c3d.tmp")
        with open(temp, "wb") as f:
            f.write(b"half")
        state = {}
        with Captured() as out, mock.patch("sys.stderr", io.StringIO()) as err:
            self.assertEqual(self.make(extra=state).resume(), 5)
        self.assertEqual(state, {"v": "good"})
        self.assertEqual(out.lines(), [{"drover_resume": {"step": 4}}])
        self.assertIn("cannot read", err.getvalue())
        self.assertEqual(self.names(), ["ckpt-000000004.pt", "ckpt-000000005.pt.corrupt"])

    def test_checkpoint_dir_is_the_default_folder(self):
        where = os.path.join(self.dir, "store", "checkpoints", "7")
        with mock.patch.dict(os.environ, {"DROVER_CHECKPOINT_DIR": where}):
            ckpt = Checkpointer(extra={"a": 1})
            self.made.append(ckpt)
            with Captured():
                ckpt.save_now(0)
            self.assertEqual(os.listdir(where), ["ckpt-000000000.pt"])
            self.assertEqual(drover.checkpoint.latest_checkpoint(),
                             os.path.join(where, "ckpt-000000000.pt"))
        self.assertTrue(callable(drover.checkpoint_dir))  # the old function is still there

    def test_bad_arguments_are_refused(self):
        with self.assertRaises(TypeError):
            self.make(model=5)
        with self.assertRaises(ValueError):
            self.make(extra={}, every=-1)
        with self.assertRaises(ValueError):
            self.make(extra={}, keep=0)
        with self.assertRaises(ValueError):
            self.make(extra={}).save_now()  # no step known yet

    def test_only_rank_0_writes(self):
        with mock.patch.dict(os.environ, {"RANK": "1"}):
            ckpt = self.make(extra={}, every=1)
        with Captured() as out:
            self.assertIsNone(ckpt.step(0))
        self.assertEqual((self.names(), out.lines()), ([], []))


class SignalTest(Folder):
    def test_sigterm_only_sets_a_flag_then_step_saves_and_exits_143(self):
        original = signal.getsignal(signal.SIGTERM)
        state = {"w": 0}
        ckpt = self.make(extra=state, every=1000)
        self.assertIsNot(signal.getsignal(signal.SIGTERM), original)
        with Captured() as out:
            ckpt.step(0)
            os.kill(os.getpid(), signal.SIGTERM)
            self.assertTrue(ckpt.stop_requested)
            self.assertEqual(self.names(), [])  # the handler saved nothing itself
            state["w"] = 1
            with self.assertRaises(SystemExit) as exit:
                ckpt.step(1)
        self.assertEqual(exit.exception.code, 143)
        self.assertEqual(out.lines()[-1]["drover_checkpoint"]["step"], 1)
        self.assertEqual(self.names(), ["ckpt-000000001.pt"])
        ckpt.close()
        self.assertEqual(signal.getsignal(signal.SIGTERM), original)

    def test_a_previous_python_handler_is_still_called(self):
        calls = []
        old = signal.signal(signal.SIGTERM, lambda s, f: calls.append(s))
        try:
            ckpt = self.make(extra={})
            os.kill(os.getpid(), signal.SIGTERM)
            self.assertEqual(calls, [signal.SIGTERM])
            self.assertTrue(ckpt.stop_requested)
            ckpt.close()
            self.assertIs(signal.getsignal(signal.SIGTERM).__class__, type(lambda: 0))
        finally:
            signal.signal(signal.SIGTERM, old)

    def test_request_stop_acts_like_the_signal(self):
        ckpt = self.make(extra={}, every=0)
        ckpt.request_stop()
        with Captured(), self.assertRaises(SystemExit) as exit:
            ckpt.step(3)
        self.assertEqual(exit.exception.code, 143)
        self.assertEqual(self.names(), ["ckpt-000000003.pt"])


class RngTest(Folder):
    def test_random_states_are_restored(self):
        random.seed(1)
        if numpy is not None:
            numpy.random.seed(2)
        if torch is not None:
            torch.manual_seed(3)
        with Captured():
            self.make(extra={}).save_now(0)

        def draw():
            out = [random.random()]
            if numpy is not None:
                out.append(float(numpy.random.rand()))
            if torch is not None:
                out.append(float(torch.rand(1)))
            return out

        expected = draw()
        draw()
        random.seed(99)
        with Captured():
            self.make(extra={}).resume()
        self.assertEqual(draw(), expected)
        with Captured():
            self.make(extra={}, rng=False).resume()
        self.assertNotEqual(draw(), expected)


def run_python(script, cwd, env_extra=None, args=()):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PYTHON_DIR,
           "OMP_NUM_THREADS": "1"}
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, script, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def parse(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


class TorchFreeProcessTest(Folder):
    def test_without_torch_state_is_pickled_and_torch_is_not_imported(self):
        script = os.path.join(self.dir, "plain.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import random, sys, drover
                state = {"total": 0.0}
                ckpt = drover.Checkpointer(extra=state, every=4)
                for step in range(ckpt.resume(), 10):
                    state["total"] += random.random()
                    drover.log(step=step, total=state["total"])
                    ckpt.step(step)
                assert "torch" not in sys.modules and "numpy" not in sys.modules
                """))
        p = run_python(script, self.dir)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        names = sorted(os.listdir(os.path.join(self.dir, "checkpoints")))
        self.assertEqual(names, ["ckpt-000000003.pt", "ckpt-000000007.pt"])
        with open(os.path.join(self.dir, "checkpoints", names[-1]), "rb") as f:
            payload = pickle.load(f)
        self.assertEqual(payload["step"], 7)
        logged = {l["step"]: l["total"] for l in parse(out) if "total" in l}
        self.assertEqual(payload["objects"]["extra"]["total"], logged[7])

    def test_a_forked_child_dies_of_sigterm_as_without_a_checkpointer(self):
        # A DataLoader worker is forked with the handler; drover signals the whole process
        # group, and a worker must not linger waiting for a step() it never calls.
        script = os.path.join(self.dir, "fork.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import os, signal, time, drover
                ckpt = drover.Checkpointer(extra={}, every=0)
                child = os.fork()
                if child == 0:
                    time.sleep(30)
                    os._exit(0)
                time.sleep(0.2)
                os.kill(child, signal.SIGTERM)
                _, status = os.waitpid(child, 0)
                print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM,
                      ckpt.stop_requested)
                """))
        p = run_python(script, self.dir)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out.strip()), (0, "True False"), err)


TRAIN = """\
import random, sys, time
import numpy as np
import torch
import drover

delay = float(sys.argv[1])
random.seed(0); np.random.seed(0); torch.manual_seed(0); torch.set_num_threads(1)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
true_w = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
ckpt = drover.Checkpointer(model=model, optimizer=opt, every=25)
start = ckpt.resume()
for step in range(start, 120):
    x = torch.randn(16, 4)
    noise = float(np.random.normal(0, 0.1)) + random.uniform(-0.01, 0.01)
    loss = ((model(x) - (x @ true_w.T + noise)) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    drover.log(step=step, loss=loss.item())
    time.sleep(delay)
    ckpt.step(step)
"""


@unittest.skipIf(torch is None or numpy is None, "torch or numpy is not installed")
class PreemptionTest(unittest.TestCase):
    def test_sigterm_mid_run_saves_exits_143_and_the_next_start_continues_the_curve(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write(TRAIN)
            env = {"DROVER_CHECKPOINT_DIR": os.path.join(d, "ckpt")}
            # The same loop never stopped, for comparison (in its own folder, at the same time).
            reference = run_python(script, d, {"DROVER_CHECKPOINT_DIR": os.path.join(d, "ref")},
                                   ["0"])
            first = run_python(script, d, env, ["0.02"])
            seen = []
            for line in first.stdout:
                seen.append(line)
                if '"loss"' in line and json.loads(line)["step"] >= 30:
                    first.send_signal(signal.SIGTERM)
                    break
            rest, err = first.communicate(timeout=60)
            self.assertEqual(first.returncode, 143, err)
            lines = parse("".join(seen) + rest)
            saves = [l["drover_checkpoint"]["step"] for l in lines if "drover_checkpoint" in l]
            logged = [l["step"] for l in lines if "loss" in l]
            saved = saves[-1]
            self.assertEqual(saves[0], 24)  # every 25 steps
            self.assertGreaterEqual(saved, 30)
            self.assertLess(saved, 119)  # stopped mid-run
            self.assertEqual(logged[-1], saved)  # the save came right after the last step
            self.assertEqual(logged, list(range(saved + 1)))
            self.assertEqual(sorted(os.listdir(env["DROVER_CHECKPOINT_DIR"])),
                             ["ckpt-000000024.pt", "ckpt-%09d.pt" % saved])

            second = run_python(script, d, env, ["0"])
            out, err = second.communicate(timeout=60)
            self.assertEqual(second.returncode, 0, err)
            lines2 = parse(out)
            self.assertEqual(lines2[0], {"drover_resume": {"step": saved}})
            resumed = [(l["step"], l["loss"]) for l in lines2 if "loss" in l]
            self.assertEqual([s for s, _ in resumed], list(range(saved + 1, 120)))

            ref_out, err = reference.communicate(timeout=60)
            self.assertEqual(reference.returncode, 0, err)
            ref = {l["step"]: l["loss"] for l in parse(ref_out) if "loss" in l}
            # Model, optimizer (momentum) and all three random generators were restored: the
            # resumed curve is the uninterrupted one, to the bit.
            self.assertEqual(resumed, [(s, ref[s]) for s, _ in resumed])
            before = {l["step"]: l["loss"] for l in lines if "loss" in l}
            self.assertEqual(before, {s: ref[s] for s in before})


if __name__ == "__main__":
    unittest.main()
