"""The README's example: a linear layer with tanh, its parameters held as globals.

    kiln export examples/linear.py:Linear -o linear.vmfb
    kiln-run --module=linear.vmfb --function=predict --input=4x3xf32=...
"""
from collections import namedtuple

import numpy as np

import kiln.numpy as knp
from kiln import Program

Params = namedtuple("Params", "w b")

_rng = np.random.default_rng(0)
params = Params(
    w=_rng.standard_normal((3, 4)).astype(np.float32),
    b=np.linspace(-0.5, 0.5, 4, dtype=np.float32),
)
example_x = np.zeros((4, 3), np.float32)


class Linear(Program, export_name="linear"):
    _params = params
    _w = params.w  # an alias of a leaf of _params, not a copy
    _calls = Program.export_global(np.int32(0), mutable=True)

    def predict(self, x=Program.like(example_x)):
        self._calls = self._calls + 1
        return self._affine(x, self._params.w, self._params.b)

    def predict_batch_mean(self, x=Program.like(example_x)):
        y = self._affine(x, self._w, self._params.b)
        return knp.mean(y, axis=0), knp.max(y)

    def calls(self):
        return self._calls

    def get_params(self):
        return self._params

    def update(self, new_params=Program.like(params)):
        self._params = new_params

    def scale_w(self, factor=Program.like(np.float32(1))):
        self._w = self._w * factor

    @Program.kernel
    def _affine(x, w, b):
        return knp.tanh(x @ w + b)


if __name__ == "__main__":
    m = Linear()
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    print("predict:", m.predict(x))
    print("calls:", m.calls())
    print(Program.get_ir(m))
