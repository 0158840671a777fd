"""Python side of ptfile's interoperability tests (run by python_test.go).

    torchio.py save DIR          write torch.save files into DIR and print, as
                                 JSON, a digest of what each holds
    torchio.py load PATH MODE... load PATH with torch.load once per MODE
                                 (weights_only or full) and print a digest of
                                 each result, or the error it raised

A digest lists the entries of a state dict in order; a tensor is described by
dtype, shape and the SHA-256 of its contiguous little-endian bytes, a float by
its IEEE bits, so that the Go side can compare exactly.
"""

import collections
import hashlib
import json
import os
import struct
import sys

import torch


def tensor_bytes(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # numpy has no bfloat16; same bits
    return t.contiguous().numpy().tobytes()


def describe(v):
    if isinstance(v, torch.Tensor):
        b = tensor_bytes(v)
        return {
            "kind": "tensor",
            "dtype": str(v.dtype).replace("torch.", ""),
            "shape": list(v.shape),
            "sha256": hashlib.sha256(b).hexdigest(),
        }
    if isinstance(v, bool):
        return {"kind": "bool", "value": str(v)}
    if isinstance(v, int):
        return {"kind": "int", "value": str(v)}
    if isinstance(v, float):
        return {"kind": "float", "value": struct.pack("<d", v).hex()}
    if isinstance(v, str):
        return {"kind": "str", "value": v}
    return {"kind": type(v).__name__}


def digest(obj):
    return {
        "type": type(obj).__module__ + "." + type(obj).__qualname__,
        "entries": [dict(name=k, **describe(v)) for k, v in obj.items()],
    }


def rand(g, dtype, *shape):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=g, dtype=torch.int64).to(dtype)


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


def views_dict():
    """Every dtype, as is and as views of other storages, and primitives."""
    g = torch.Generator().manual_seed(0)
    sd = collections.OrderedDict()
    for dt in DTYPES:
        name = str(dt).replace("torch.", "")
        sd["c." + name] = rand(g, dt, 2, 3)
        sd["t." + name] = rand(g, dt, 3, 4).t()
        sd["s." + name] = rand(g, dt, 5, 6)[1:4, 2:]
        sd["0d." + name] = rand(g, dt)
        sd["empty." + name] = rand(g, dt, 2, 0, 3)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.5 - 3
    sd["transposed"] = base.t()
    sd["sliced"] = base[1:, 2:5]
    sd["stepped"] = base[::2, ::3]
    sd["row"] = base[2]
    sd["element"] = base[3, 4]
    shared = torch.arange(30, dtype=torch.int32)
    sd["shared.a"] = shared[:10]
    sd["shared.b"] = shared[10:].view(4, 5)
    sd["shared.whole"] = shared
    sd["shared.t"] = shared.view(5, 6).t()
    sd["expanded"] = torch.arange(3, dtype=torch.int16).expand(4, 3)
    sd["perm4d"] = torch.arange(120, dtype=torch.float64).reshape(2, 3, 4, 5).permute(3, 1, 0, 2)
    sd["big"] = torch.randn(300, 700, generator=g)
    sd["far offset"] = torch.arange(70000, dtype=torch.int32)[66000:]
    tied = torch.randn(3, 3, generator=g)
    sd["tied.a"] = tied
    sd["tied.b"] = tied  # one object, pickled once and referenced again
    sd["param"] = torch.nn.Parameter(torch.randn(2, 2, generator=g))
    sd["step"] = 1234
    sd["neg"] = -5
    sd["huge"] = 2 ** 40
    sd["min64"] = -2 ** 63
    sd["lr"] = 0.001
    sd["inf"] = float("-inf")
    sd["name"] = "héllo ✓"
    sd["flag"] = True
    sd["off"] = False
    return sd


def module_dict():
    """A real model's state_dict(): OrderedDict with _metadata (BUILD)."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    m(torch.randn(5, 3))  # moves the batch-norm statistics
    return m.state_dict()


def plain_dict():
    """A plain dict rather than an OrderedDict."""
    return {"b": torch.ones(2, dtype=torch.int8), "a": torch.zeros(1, dtype=torch.float16), "n": 3}


def save(out):
    result = {}
    for name, make in [("views.pt", views_dict), ("module.pt", module_dict), ("plain.pt", plain_dict)]:
        obj = make()
        torch.save(obj, os.path.join(out, name))
        result[name] = digest(obj)
    return result


def load(path, modes):
    results = []
    for mode in modes:
        try:
            obj = torch.load(path, weights_only=(mode == "weights_only"))
            r = digest(obj)
        except Exception as e:  # reported to the Go side, which decides
            r = {"error": "%s: %s" % (type(e).__name__, e)}
        r["mode"] = mode
        results.append(r)
    return results


def main():
    if sys.argv[1] == "save":
        out = save(sys.argv[2])
    else:
        out = load(sys.argv[2], sys.argv[3:])
    json.dump({"torch": torch.__version__, "result": out}, sys.stdout)


if __name__ == "__main__":
    main()
