"""Tests of drover's Python client, run by CTest with /usr/bin/python3 (torch from Debian)."""

import io
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import drover

HERE = pathlib.Path(__file__).resolve().parent


from capture import Captured  # noqa: E402  (python/tests is on the path)


class LogTest(unittest.TestCase):
    def test_one_json_line_per_call(self):
        with Captured() as out:
            drover.log(step=3, loss=0.5, val_acc=0.9)
            drover.log(loss=0.25)
        self.assertEqual(out.lines(), [{"step": 3, "loss": 0.5, "val_acc": 0.9}, {"loss": 0.25}])

    def test_nan_and_infinity_are_kept(self):
        with Captured() as out:
            drover.log(step=1, loss=float("nan"), grad=float("inf"))
        text = out.buf.getvalue()
        self.assertIn("NaN", text)
        self.assertIn("Infinity", text)
        line = out.lines()[0]
        self.assertTrue(math.isnan(line["loss"]))

    def test_bad_values_are_refused(self):
        with self.assertRaises(TypeError):
            drover.log(step=1, loss="high")
        with self.assertRaises(TypeError):
            drover.log(step=1)  # no metric at all
        with self.assertRaises(TypeError):
            drover.log(step=1, converged=True)  # a flag is not a metric

    def test_scalar_like_objects_become_floats(self):
        class Scalar:
            def __float__(self):
                return 2.5

        with Captured() as out:
            drover.log(step=1, loss=Scalar())
        self.assertEqual(out.lines(), [{"step": 1, "loss": 2.5}])


class EnvironmentTest(unittest.TestCase):
    def test_outside_drover(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertFalse(drover.inside_drover())
            self.assertEqual(drover.params(), {})
            self.assertIsNone(drover.run_id())
            self.assertEqual(drover.attempt(), 1)
            with tempfile.TemporaryDirectory() as d:
                old = os.getcwd()
                os.chdir(d)
                try:
                    path = drover.checkpoint_dir()
                    self.assertTrue(path.is_dir())
                    self.assertEqual(path.resolve(), (pathlib.Path(d) / "checkpoints").resolve())
                finally:
                    os.chdir(old)

    def test_inside_drover(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"DROVER_RUN_ID": "7", "DROVER_ATTEMPT": "2",
                   "DROVER_PARAMS": json.dumps({"lr": 0.01, "model": "mlp"}),
                   "DROVER_CHECKPOINT_DIR": os.path.join(d, "runs", "7", "checkpoints")}
            with mock.patch.dict(os.environ, env, clear=True):
                self.assertTrue(drover.inside_drover())
                self.assertEqual(drover.run_id(), 7)
                self.assertEqual(drover.attempt(), 2)
                self.assertEqual(drover.params(), {"lr": 0.01, "model": "mlp"})
                self.assertTrue(drover.checkpoint_dir().is_dir())
                self.assertEqual(str(drover.checkpoint_dir()), env["DROVER_CHECKPOINT_DIR"])


class AlertTest(unittest.TestCase):
    def test_alert_line_has_no_numeric_top_level_field(self):
        with Captured() as out:
            drover.alert("validation set is empty", level="error", split="val")
        (line,) = out.lines()
        self.assertEqual(list(line), ["drover_alert"])
        self.assertEqual(line["drover_alert"]["level"], "error")
        self.assertEqual(line["drover_alert"]["key"], "validation set is empty")
        self.assertEqual(line["drover_alert"]["details"], {"split": "val"})
        with self.assertRaises(ValueError):
            drover.alert("x", level="loud")


class ByPathTest(unittest.TestCase):
    def test_usable_by_path_without_installing(self):
        script = "import drover; drover.log(step=1, loss=0.5)"
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(HERE.parent)}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True)
        self.assertEqual(json.loads(out.stdout), {"step": 1, "loss": 0.5})


try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is installed by scripts/setup.sh
    torch = None


@unittest.skipIf(torch is None, "torch is not installed")
class TorchHelperTest(unittest.TestCase):
    def test_monitor_logs_gradient_norm_every_n_steps(self):
        from drover.torch import TrainingMonitor, gradient_norm

        model = torch.nn.Linear(3, 1)
        for p in model.parameters():
            p.grad = torch.ones_like(p)  # 3 weights + 1 bias, all 1: norm 2
        self.assertAlmostEqual(gradient_norm(model), 2.0, places=5)
        monitor = TrainingMonitor(every=5)
        with Captured() as out:
            for step in range(11):
                monitor.step(step, model=model)
        self.assertEqual([l["step"] for l in out.lines()], [0, 5, 10])
        self.assertAlmostEqual(out.lines()[0]["grad_norm"], 2.0, places=5)

    def test_amp_scale_is_logged_when_the_scaler_is_enabled(self):
        from drover.torch import TrainingMonitor

        class Scaler:
            def is_enabled(self):
                return True

            def get_scale(self):
                return 65536.0

        with Captured() as out:
            TrainingMonitor(every=1).step(0, scaler=Scaler())
        self.assertEqual(out.lines(), [{"step": 0, "amp_scale": 65536.0}])
        with self.assertRaises(ValueError):
            TrainingMonitor(every=0)


if __name__ == "__main__":
    unittest.main()
