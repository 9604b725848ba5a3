"""bench/models.txt, the one list of concurrency models (tests/concurrency_models_test reads
it too): NAME KEY=VALUE ... a line, each KEY=VALUE a [gateway] key with its TOML value."""

import os

FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models.txt")


def load(path=FILE, only=None):
    """[(name, [(key, value), ...])] in file order; the first is the default model. `only`: a
    list of names to keep (an unknown name is an error, not an empty run)."""
    models = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            keys = []
            for kv in words[1:]:
                key, eq, value = kv.partition("=")
                if not key or not eq or not value:
                    raise ValueError(f"{path}:{number}: '{kv}' is not KEY=VALUE")
                keys.append((key, value))
            models.append((words[0], keys))
    if only:
        unknown = set(only) - {name for name, _ in models}
        if unknown:
            raise ValueError(f"not in {path}: {' '.join(sorted(unknown))}")
        models = [m for m in models if m[0] in only]
    return models
