"""What torch.compile made of a compiled step: per generated program, its convolutions, its fused kernels, and how
many of those kernels do nothing but change a tensor's layout (permute, clone, copy).

Why: Keras' torch backend computes channels_last models by permuting each convolution's input to channels_first
and asking for the channels_last memory format (two copies per convolution when run eagerly). Whether the
compiled step still pays for that shows in Inductor's output code, which it keeps in its cache folder:

    TORCHINDUCTOR_CACHE_DIR=/tmp/ic prednet-bench --backend torch --device cpu --jit-compile --mode train \\
        --batch-size 2 --size 32x32 --nt 3 --steps 2 --warmup 1 -q --json /tmp/ic.json
    python scripts/inductor_kernels.py /tmp/ic --json layout.json

Reads the generated Python modules (the `call` function of each); CPU programs name their kernels cpp_fused_*,
GPU ones triton_*.
"""
import argparse
import json
import pathlib
import re

KERNEL = re.compile(r"^\s+((?:cpp|triton)_\w+?)(?:_\d+)?(?:\.run)?\(", re.M)
PREFIX = re.compile(r"^(?:cpp|triton)_(?:poi_|per_|red_|tem_)?(?:fused_)?")
# The words of an ATen op name that move data without computing (Inductor names a kernel after the ops it fuses).
LAYOUT_WORDS = {"", "clone", "permute", "copy", "view", "transpose", "unsafe", "t", "contiguous", "expand"}


def layout_only(name):
    return set(PREFIX.sub("", name).split("_")) <= LAYOUT_WORDS
CONVOLUTION = re.compile(r"extern_kernels\.convolution\(|aten\.convolution(?:_backward)?\.default\(")


def program_summary(path):
    text = path.read_text(errors="replace")
    call = text[text.find("def call("):] if "def call(" in text else ""
    kernels = KERNEL.findall(call)
    return {
        "file": str(path),
        "convolutions": len(CONVOLUTION.findall(call)),
        "kernels": len(kernels),
        "layout_only_kernels": sum(1 for name in kernels if layout_only(name)),
        "kernels_naming_permute_or_clone": sum(1 for name in kernels if re.search("permute|clone", name)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache_dir", type=pathlib.Path, help="TORCHINDUCTOR_CACHE_DIR of the compiled run")
    parser.add_argument("--json", help="where the summary goes")
    args = parser.parse_args(argv)
    programs = [program_summary(path) for path in sorted(args.cache_dir.rglob("*.py"))]
    programs = [p for p in programs if p["kernels"] or p["convolutions"]]
    if not programs:
        raise SystemExit(f"{args.cache_dir}: no generated program found (was TORCHINDUCTOR_CACHE_DIR set for the run?)")
    for p in programs:
        print(f"{p['file']}: {p['convolutions']} convolutions, {p['kernels']} kernels, "
              f"{p['layout_only_kernels']} only change layouts ({p['kernels_naming_permute_or_clone']} fuse a permute or clone)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"programs": programs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
