"""Logged hyper-parameters: drover.log_hparams, drover.torch.Module and drover.torch.autolog()
(the last in a real process, since it patches torch and argparse for the whole interpreter)."""

import argparse
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

import drover

HERE = pathlib.Path(__file__).resolve().parent
PYTHON_DIR = str(HERE.parent)

try:
    import torch
except ImportError:  # pragma: no cover - Debian's python3-torch is installed by scripts/setup.sh
    torch = None


from capture import Captured  # noqa: E402  (python/tests is on the path)


def hparam_lines(text):
    """The drover_hparams bodies of a process's stdout, checking each line's shape."""
    found = []
    for line in text.splitlines():
        obj = json.loads(line)
        if "drover_hparams" in obj:
            assert list(obj) == ["drover_hparams"], obj
            body = obj["drover_hparams"]
            for k, v in body.items():  # flat: every value a scalar
                assert v is None or isinstance(v, (bool, int, float, str)), (k, v)
            found.append(body)
    return found


def run_script(source):
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "script.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(source))
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PYTHON_DIR,
               "OMP_NUM_THREADS": "1"}
        p = subprocess.run([sys.executable, script, "--lr", "0.05", "--layers", "3"], cwd=d,
                           env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    return p.stdout


class LogHparamsTest(unittest.TestCase):
    def test_namespace_dict_and_keywords(self):
        ns = argparse.Namespace(lr=0.01, batch_size=32, name="run", flag=True, path=None)
        with Captured() as out:
            flat = drover.log_hparams(ns, {"opt": {"beta1": 0.9, "eps": 1e-8}, "wd": 0.0},
                                      dropout=0.1)
        self.assertEqual(out.lines(), [{"drover_hparams": {
            "args.lr": 0.01, "args.batch_size": 32, "args.name": "run", "args.flag": True,
            "args.path": None, "opt.beta1": 0.9, "opt.eps": 1e-8, "wd": 0.0, "dropout": 0.1}}])
        self.assertEqual(flat, out.lines()[0]["drover_hparams"])
        self.assertTrue(out.buf.getvalue().startswith('{"drover_hparams": {"args.lr": 0.01, '))

    def test_other_values_are_their_repr_cut_to_200_characters(self):
        class Thing:
            def __repr__(self):
                return "T" * 500

        with Captured() as out:
            drover.log_hparams(sizes=(64, 128), thing=Thing(), kind=int, empty={})
        body = out.lines()[0]["drover_hparams"]
        self.assertEqual(body["sizes"], "(64, 128)")
        self.assertEqual(body["thing"], "T" * 200)
        self.assertEqual(body["kind"], "<class 'int'>")
        self.assertEqual(body["empty"], "{}")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_scalars_of_numpy_and_torch_are_numbers(self):
        import numpy as np

        with Captured() as out:
            drover.log_hparams(a=np.int64(3), b=np.float32(0.5), c=torch.tensor(2),
                               d=np.bool_(True), e=torch.ones(2))
        body = out.lines()[0]["drover_hparams"]
        self.assertEqual(body, {"a": 3, "b": 0.5, "c": 2, "d": True, "e": repr(torch.ones(2))})

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            drover.log_hparams()
        with self.assertRaises(TypeError):
            drover.log_hparams([1, 2])

    def test_the_line_is_not_a_metric(self):
        with Captured() as out:
            drover.log_hparams(lr=0.1)
        (line,) = out.lines()
        self.assertFalse(any(isinstance(v, (int, float)) for v in line.values()))


@unittest.skipIf(torch is None, "torch is not installed")
class ModuleBaseTest(unittest.TestCase):
    def test_a_subclass_records_its_own_arguments_once(self):
        import drover.torch as dt

        class Block(dt.Module):
            def __init__(self, width, act="gelu"):
                super().__init__()
                self.fc = torch.nn.Linear(width, width)

        class Net(dt.Module):
            def __init__(self, hidden=128, dropout=0.1, sizes=(1, 2), **extra):
                super().__init__()
                self.block = Block(hidden)  # built inside Net: not a line of its own

        class Wide(Net):
            def __init__(self, factor, **kw):
                super().__init__(**kw)

        class Plain(torch.nn.Module):  # not a drover.torch.Module: never recorded
            def __init__(self, x=1):
                super().__init__()

        with Captured() as out:
            Net(64, norm="layer")
            Block(8)
            Wide(2, hidden=32)
            Plain()
        self.assertEqual(out.lines(), [
            {"drover_hparams": {"Net.hidden": 64, "Net.dropout": 0.1, "Net.sizes": "(1, 2)",
                                "Net.norm": "layer"}},
            {"drover_hparams": {"Block.width": 8, "Block.act": "gelu"}},
            {"drover_hparams": {"Wide.factor": 2, "Wide.hidden": 32}},
        ])
        with Captured():
            self.assertIsInstance(Net(), torch.nn.Module)

    def test_importing_drover_torch_does_not_import_torch(self):
        code = "import sys, drover, drover.torch; print('torch' in sys.modules)"
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PYTHON_DIR}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        self.assertEqual(out.stdout.strip(), "False")


@unittest.skipIf(torch is None, "torch is not installed")
class AutologTest(unittest.TestCase):
    def test_modules_and_argparse_are_recorded(self):
        out = run_script("""\
            import argparse, copy, torch, drover, drover.torch

            class Encoder(torch.nn.Module):          # defined before autolog(): still recorded
                def __init__(self, dim, depth=2):
                    super().__init__()
                    self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim)
                                                      for _ in range(depth))

            drover.torch.autolog()

            class Net(torch.nn.Module):
                def __init__(self, dim=16, classes=10, act=torch.nn.ReLU):
                    super().__init__()
                    self.encoder = Encoder(dim)       # nested: no line of its own
                    self.head = torch.nn.Linear(dim, classes)

            class Small(Net):                         # no __init__ of its own
                pass

            class Lin(torch.nn.Linear):               # a user class over torch's own __init__
                pass

            p = argparse.ArgumentParser()
            p.add_argument("--lr", type=float, default=0.1)
            p.add_argument("--layers", type=int, default=1)
            p.add_argument("--name", default=None)
            args = p.parse_args()
            model = Net(32)
            enc = Encoder(8, depth=1)
            Small(classes=3)
            Lin(2, 1, bias=False)
            torch.nn.Linear(3, 4)                     # torch's own classes are not recorded
            copy.deepcopy(model)                      # no construction, no line
            drover.log(step=0, loss=1.0)
            drover.torch.autolog(False, False)
            Net(); p.parse_args()                     # off again: nothing
            """)
        relu = "<class 'torch.nn.modules.activation.ReLU'>"
        self.assertEqual(hparam_lines(out), [
            {"args.lr": 0.05, "args.layers": 3, "args.name": None},
            {"Net.dim": 32, "Net.classes": 10, "Net.act": relu},
            {"Encoder.dim": 8, "Encoder.depth": 1},
            {"Small.dim": 16, "Small.classes": 3, "Small.act": relu},
            {"Lin.in_features": 2, "Lin.out_features": 1, "Lin.bias": False, "Lin.device": None,
             "Lin.dtype": None},
        ])
        self.assertIn({"step": 0, "loss": 1.0}, [json.loads(l) for l in out.splitlines()])


if __name__ == "__main__":
    unittest.main()
