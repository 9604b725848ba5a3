"""bench/model_harness/models.txt, the models the patterns' comparison runs: each line a NAME,
then either `product` (the real gatewayd, its one model) or model-harness arguments
(`--model X --drain Y ...`), then any KEY=VALUE [gateway] keys of gatewayd.toml (TOML values,
no spaces) the run's configuration carries."""

import dataclasses
import os

FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "model_harness", "models.txt")


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    args: tuple = ()  # model-harness arguments; () = the real gatewayd
    keys: tuple = ()  # ((key, value), ...) for [gateway] in gatewayd.toml

    @property
    def product(self):
        return not self.args


# What bench/run's scenarios other than "models" run: gatewayd as it is.
GATEWAYD = Model("gatewayd")


def parse_line(words, where):
    name, rest = words[0], words[1:]
    args, keys, product = [], [], False
    i = 0
    while i < len(rest):
        w = rest[i]
        if w == "product":
            product = True
        elif w.startswith("--"):
            if i + 1 >= len(rest):
                raise ValueError(f"{where}: {w} needs a value")
            args += [w, rest[i + 1]]
            i += 1
        else:
            key, eq, value = w.partition("=")
            if not key or not eq or not value:
                raise ValueError(f"{where}: '{w}' is not --FLAG VALUE, KEY=VALUE or 'product'")
            keys.append((key, value))
        i += 1
    if product == bool(args):
        raise ValueError(f"{where}: a line is either 'product' or model-harness arguments")
    return Model(name, tuple(args), tuple(keys))


def load(path=FILE, only=None):
    """[Model] in file order. `only`: a list of names to keep (an unknown name is an error, not
    an empty run)."""
    out = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if words:
                out.append(parse_line(words, f"{path}:{number}"))
    if only:
        unknown = set(only) - {m.name for m in out}
        if unknown:
            raise ValueError(f"not in {path}: {' '.join(sorted(unknown))}")
        out = [m for m in out if m.name in only]
    return out
