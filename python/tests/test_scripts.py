"""The training scripts that use the client, run for real on CPU: the `drover init` template
(src/cli/init_template/) and the digits example (examples/digits/train.py)."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
PYTHON_DIR = str(HERE.parent)
ROOT = HERE.parent.parent
TEMPLATE = ROOT / "src" / "cli" / "init_template"
DIGITS = ROOT / "examples" / "digits" / "train.py"

try:
    import torch  # noqa: F401
    import numpy  # noqa: F401
except ImportError:  # pragma: no cover - Debian's python3-torch is installed by scripts/setup.sh
    torch = None
try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None


def start(script, cwd, args, checkpoints):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PYTHON_DIR,
           "OMP_NUM_THREADS": "1", "DROVER_CHECKPOINT_DIR": str(checkpoints)}
    return subprocess.Popen([sys.executable, str(script), *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, test):
    out, err = proc.communicate(timeout=120)
    test.assertEqual(proc.returncode, 0, err)
    return [json.loads(l) for l in out.splitlines()]


@unittest.skipIf(torch is None, "torch or numpy is not installed")
class InitTemplateTest(unittest.TestCase):
    ARGS = ["--epochs", "2", "--samples", "1024", "--checkpoint-every", "10", "--log-every", "1"]

    def test_runs_on_cpu_to_the_end_and_resumes_with_the_same_curve(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(TEMPLATE / "train.py", d)
            ckpt = pathlib.Path(d) / "ckpt"
            lines = finish(start("train.py", d, self.ARGS, ckpt), self)
            # 819 training examples / 64 = 13 steps per epoch, 26 in all.
            steps = [l["step"] for l in lines if "loss" in l]
            self.assertEqual(steps, list(range(26)))
            vals = [l for l in lines if "val_acc" in l]
            self.assertEqual([(v["step"], v["epoch"]) for v in vals], [(12, 1), (25, 2)])
            self.assertGreater(vals[-1]["val_acc"], 0.5)  # it learns (4 classes: 0.25 by chance)
            self.assertTrue(all("grad_norm" in l and "lr" in l for l in lines if "loss" in l))
            saves = [l["drover_checkpoint"]["step"] for l in lines if "drover_checkpoint" in l]
            self.assertEqual(saves, [9, 19, 25])  # every 10 steps, and the end
            self.assertEqual(sorted(os.listdir(ckpt)), ["ckpt-000000019.pt", "ckpt-000000025.pt"])
            hparams = [l["drover_hparams"] for l in lines if "drover_hparams" in l]
            self.assertEqual(hparams[0]["args.epochs"], 2)
            self.assertEqual(hparams[1], {"Mlp.features": 32, "Mlp.classes": 4,
                                          "Mlp.hidden": 128, "Mlp.dropout": 0.1})

            # Started again after the end: nothing left to train.
            again = finish(start("train.py", d, self.ARGS, ckpt), self)
            self.assertIn({"drover_resume": {"step": 25}}, again)
            self.assertEqual([l for l in again if "loss" in l or "val_acc" in l], [])

            # As if preempted after step 19: it resumes in the middle of epoch 2 and its curve
            # is the one of the run that was never stopped (seeds, data order, dropout, AdamW
            # moments and the cosine schedule all restored).
            os.unlink(ckpt / "ckpt-000000025.pt")
            resumed = finish(start("train.py", d, self.ARGS, ckpt), self)
            self.assertIn({"drover_resume": {"step": 19}}, resumed)
            metrics = [l for l in resumed if "loss" in l or "val_acc" in l]
            self.assertEqual([l["step"] for l in metrics if "loss" in l], list(range(20, 26)))
            self.assertEqual(metrics, [l for l in lines if ("loss" in l or "val_acc" in l)
                                       and l["step"] >= 20])

    @unittest.skipIf(yaml is None, "PyYAML is not installed")
    def test_the_recipe_matches_the_script(self):
        recipe = yaml.safe_load((TEMPLATE / "drover.yaml").read_text())
        self.assertIs(recipe.get("checkpoint"), True)
        placeholders = re.findall(r"\{(\w+)\}", recipe["command"])
        self.assertEqual(sorted(placeholders), sorted(recipe["params"]))
        self.assertEqual(list(recipe["metrics"])[0], "val_acc")  # the objective: first metric
        self.assertEqual(recipe["metrics"]["val_acc"]["mode"], "max")
        # Each parameter is a flag of train.py with the same default, inside its min/max.
        source = (TEMPLATE / "train.py").read_text()
        for name, p in recipe["params"].items():
            flag = "--" + name.replace("_", "-")
            self.assertIn("%s {%s}" % (flag, name), recipe["command"])
            m = re.search(r'add_argument\("%s", type=(\w+), default=([^,)]+)' % flag, source)
            self.assertIsNotNone(m, flag)
            self.assertEqual(m.group(1), p["type"], name)
            self.assertEqual(float(m.group(2)), float(p["default"]), name)
            if "min" in p:
                self.assertLessEqual(float(p["min"]), float(p["default"]), name)
                self.assertLessEqual(float(p["default"]), float(p["max"]), name)


@unittest.skipIf(torch is None, "torch or numpy is not installed")
class DigitsExampleTest(unittest.TestCase):
    def test_resumes_after_the_saved_epoch_with_the_curve_of_an_unstopped_run(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            common = ["--monitor-every", "0", "--batch-size", "64"]
            reference = start(DIGITS, d, ["--epochs", "3", *common], d / "ref")
            first = finish(start(DIGITS, d, ["--epochs", "2", *common], d / "run"), self)
            self.assertEqual([l["drover_checkpoint"]["step"] for l in first
                              if "drover_checkpoint" in l], [1, 2])
            second = finish(start(DIGITS, d, ["--epochs", "3", *common], d / "run"), self)
            self.assertEqual(second[0], {"drover_resume": {"step": 2}})
            curve = [l for l in second if "val_acc" in l]
            self.assertEqual([l["step"] for l in curve], [3])
            ref = [l for l in finish(reference, self) if "val_acc" in l]
            self.assertEqual([l for l in first if "val_acc" in l] + curve, ref)


if __name__ == "__main__":
    unittest.main()
