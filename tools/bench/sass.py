"""The machine code a WGSL kernel became, from the pipeline caches `kernel_stats --dump` wrote.

    python3 tools/bench/sass.py DIR [NVDISASM]

NVIDIA's Vulkan driver (580) keeps a compiled kernel in its pipeline cache as a zstd frame whose
contents hold the raw Hopper instructions, 16 bytes each, ending in `EXIT` and a branch to itself.
For each `*.cache` in DIR this decompresses the frame, finds the instructions (the first offset
from which `nvdisasm -b SM90` reads through to the last `EXIT` without error), writes `*.sass`
and prints how many instructions of each kind the kernel has, spills (local loads and stores)
first: what the compiler did with the WGSL, which timings alone do not show. It runs anywhere:
the caches come back from the GPU machine; `pip install zstandard nvidia-cuda-nvdisasm` gives
the rest (NVDISASM defaults to the one on the PATH, else the wheel's).
"""

import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import zstandard

# Instruction families worth counting in a matmul-like kernel.
FAMILIES = ["LDL", "STL", "FFMA", "LDS", "STS", "LDG", "STG", "BAR", "BRA", "IMAD", "IADD3", "ISETP"]
EXIT = bytes.fromhex("4d79000000000000")  # the low half of an unpredicated EXIT


def nvdisasm_path():
    found = shutil.which("nvdisasm")
    if found:
        return found
    import site
    for root in site.getsitepackages() + [site.getusersitepackages()]:
        hits = glob.glob(os.path.join(root, "nvidia", "cu*", "bin", "nvdisasm"))
        if hits:
            return hits[0]
    sys.exit("no nvdisasm: pip install nvidia-cuda-nvdisasm, or pass its path")


def disassemble(nvdisasm, code):
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        run = subprocess.run([nvdisasm, "-b", "SM90", f.name], capture_output=True, text=True)
    return run.stdout if run.returncode == 0 and "error" not in run.stderr else None


def instructions(nvdisasm, blob):
    """The disassembly of the kernel in one decompressed cache entry, or None."""
    end = blob.rfind(EXIT)
    if end < 0:
        return None
    end += 16 * 2  # EXIT and the branch to itself
    # The code follows a header of a few hundred bytes, 16-byte aligned relative to EXIT: the
    # first offset whose next four instructions decode and that decodes through to EXIT.
    for start in range(end % 16, min(4096, end), 16):
        if disassemble(nvdisasm, blob[start:start + 64]) is not None:
            whole = disassemble(nvdisasm, blob[start:end])
            if whole is not None:
                return whole
    return None


def main(folder, nvdisasm):
    for path in sorted(glob.glob(os.path.join(folder, "*.cache"))):
        name = os.path.basename(path)
        blob = open(path, "rb").read()
        frame = blob.find(b"\x28\xb5\x2f\xfd")  # zstd magic
        if frame < 0:
            print(f"{name}: {len(blob)} bytes, no zstd frame; starts {blob[:32].hex()}")
            continue
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(blob[frame:])
        sass = instructions(nvdisasm, raw)
        if sass is None:
            print(f"{name}: no instructions found in {len(raw)} bytes")
            continue
        open(path[:-len(".cache")] + ".sass", "w").write(sass)
        ops = collections.Counter(m.group(1).split(".")[0]
                                  for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
        counts = ", ".join(f"{f} {ops[f]}" for f in FAMILIES if ops[f])
        print(f"{name}: {sum(ops.values())} instructions; {counts}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else nvdisasm_path())
