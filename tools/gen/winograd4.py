"""Writes the tile transforms of Winograd F(4x4, 3x3): `python3 tools/gen/winograd4.py`.

F(4x4, 3x3) (Lavin & Gray, interpolation points 0, 1, -1, 2, -2 and infinity) turns a 6x6 input
tile and a 3x3 filter into 36 products that give a 4x4 output tile. Each transform is a product
`M X M^T` by one small constant matrix on both sides; written out as scalar straight-line code
(every tile element a constant index, so it stays in registers on every driver), the 36 or 16
lines per side are too many to write by hand, so this script does it. The kernels that call these
functions are `rumus/shaders/winograd4.wgsl`; `tools/gen/winograd_transforms.py` checks the
matrices against a direct convolution in float64. Edit here, regenerate, then run
`cargo test --release --test house --test ops` (naga validation, CPU <-> wgpu parity).

`python3 tools/gen/winograd4.py --out DIR` writes it into DIR instead (CI compares that with the
committed file, `tests/house/`).
"""

import os
import sys
from fractions import Fraction as F

# B^T (6x6): input tiles, V = B^T d B.
BT = [
    [4, 0, -5, 0, 1, 0],
    [0, -4, -4, 1, 1, 0],
    [0, 4, -4, -1, 1, 0],
    [0, -2, -1, 2, 1, 0],
    [0, 2, -1, -2, 1, 0],
    [0, 4, 0, -5, 0, 1],
]
# G (6x3): filters, U = G g G^T.
G = [
    [F(1, 4), 0, 0],
    [F(-1, 6), F(-1, 6), F(-1, 6)],
    [F(-1, 6), F(1, 6), F(-1, 6)],
    [F(1, 24), F(1, 12), F(1, 6)],
    [F(1, 24), F(-1, 12), F(1, 6)],
    [0, 0, 1],
]
# A^T (4x6): outputs, Y = A^T M A.
AT = [
    [1, 1, 1, 1, 1, 0],
    [0, 1, -1, 2, -2, 0],
    [0, 1, 1, 4, 4, 0],
    [0, 1, -1, 8, -8, 1],
]


def transpose(m):
    return [list(col) for col in zip(*m)]


def literal(c):
    """A WGSL float literal for the positive rational c (a quotient WGSL folds at compile time)."""
    c = F(c)
    if c.denominator == 1:
        return f"{c.numerator}.0"
    return f"({c.numerator}.0 / {c.denominator}.0)"


def combination(coefs, names):
    """sum(coefs[i] * names[i]) as a WGSL expression, terms of equal magnitude grouped under one
    multiplication."""
    groups = {}
    for c, name in zip(coefs, names):
        c = F(c)
        if c != 0:
            groups.setdefault(abs(c), []).append((c > 0, name))
    if not groups:
        return "0.0"
    parts = []
    for magnitude in sorted(groups, reverse=True):
        terms = groups[magnitude]
        # A group of negative terms only is subtracted as a whole.
        negative = not any(positive for positive, _ in terms)
        if negative:
            terms = [(True, name) for _, name in terms]
        # Lead with a positive term.
        terms.sort(key=lambda t: not t[0])
        inner = ""
        for k, (positive, name) in enumerate(terms):
            if k == 0:
                inner = name
            else:
                inner += f" + {name}" if positive else f" - {name}"
        if len(terms) > 1:
            inner = f"({inner})"
        part = inner if magnitude == 1 else f"{literal(magnitude)} * {inner}"
        parts.append(("-" if negative else "") + part)
    expr = parts[0]
    for part in parts[1:]:
        expr += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
    return expr


def two_sided(name, doc, m, arg):
    """fn name(arg: array<f32, n*n>) -> array<f32, r*r>: M X M^T for the r x n matrix m, X and
    the result row-major."""
    r, n = len(m), len(m[0])
    lines = [f"// {line}" if line else "//" for line in doc.split("\n")]
    lines.append(f"fn {name}({arg}: array<f32, {n * n}>) -> array<f32, {r * r}> {{")
    # t = M X: r x n, by rows of X.
    for k in range(r):
        for j in range(n):
            lines.append(f"    let t{k}_{j} = {combination(m[k], [f'{arg}[{i * n + j}]' for i in range(n)])};")
    # (M X) M^T: r x r.
    for k in range(r):
        for l in range(r):
            lines.append(f"    let v{k}_{l} = {combination(m[l], [f't{k}_{j}' for j in range(n)])};")
    values = [f"v{k}_{l}" for k in range(r) for l in range(r)]
    rows = [", ".join(values[i : i + r]) for i in range(0, len(values), r)]
    lines.append(f"    return array<f32, {r * r}>(")
    lines.extend(f"        {row}," for row in rows)
    lines.append("    );")
    lines.append("}")
    return "\n".join(lines)


def loads(name, doc, side):
    """fn name(o: TileOrigin, h: u32, w: u32) -> array<f32, side*side>: the tile at o, row-major,
    zeros outside h x w (the shared `tap`)."""
    lines = [f"// {doc}", f"fn {name}(o: TileOrigin, h: u32, w: u32) -> array<f32, {side * side}> {{"]
    lines.append(f"    return array<f32, {side * side}>(")
    for r in range(side):
        taps = [f"tap(o.plane, o.y + {r}, o.x + {c}, h, w)" for c in range(side)]
        lines.append("        " + ", ".join(taps) + ",")
    lines.append("    );")
    lines.append("}")
    return "\n".join(lines)


def planes(count, load):
    """Straight-line reads (`load`) or writes of `count` planes of a tile matrix."""
    if load:
        lines = [
            f"// The {count} values of one element across the planes of `src`: src[at + xi * plane].",
            f"fn load_planes{count}(at: u32, plane: u32) -> array<f32, {count}> {{",
            f"    return array<f32, {count}>(",
        ]
        for i in range(0, count, 6):
            lines.append(
                "        " + ", ".join(f"src[at + {x}u * plane]" for x in range(i, min(i + 6, count))) + ","
            )
        lines += ["    );", "}"]
    else:
        lines = [
            f"// The {count} values of one element to the planes of `out`: out[at + xi * plane] = v[xi].",
            f"fn store_planes{count}(v: array<f32, {count}>, at: u32, plane: u32) {{",
        ]
        lines += [f"    out[at + {x}u * plane] = v[{x}];" for x in range(count)]
        lines.append("}")
    return "\n".join(lines)


def output_store():
    """The 4x4 output tile y (plus b) into the plane at `base`, rows from y0 and columns from
    x0, only where inside out_h x out_w."""
    lines = [
        "// The 4×4 output tile y plus b into the output plane at `base`, rows from y0 and columns",
        "// from x0, only inside out_h × out_w.",
        "fn store_output4(y: array<f32, 16>, b: f32, base: u32, y0: u32, x0: u32) {",
    ]
    for r in range(4):
        lines.append(f"    if y0 + {r}u < p.out_h {{")
        lines.append(f"        let row = base + (y0 + {r}u) * p.out_w + x0;")
        for c in range(4):
            if c == 0:
                lines.append(f"        out[row] = y[{4 * r}] + b;")
            else:
                lines.append(f"        if x0 + {c}u < p.out_w {{")
                lines.append(f"            out[row + {c}u] = y[{4 * r + c}] + b;")
                lines.append("        }")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines)


def vector_output_store():
    """store_output4 for out_w a multiple of 4: one aligned vec4 write of `out4` per row."""
    lines = [
        "// The 4×4 output tile y plus b into the output plane at `base`, as `store_output4` writes it,",
        "// one vec4 write of `out4` per row inside out_h (out_w a multiple of 4).",
        "fn store_output4_vec4(y: array<f32, 16>, b: f32, base: u32, y0: u32, x0: u32) {",
    ]
    for r in range(4):
        lines.append(f"    if y0 + {r}u < p.out_h {{")
        vals = ", ".join(f"y[{4 * r + c}]" for c in range(4))
        lines.append(f"        out4[(base + (y0 + {r}u) * p.out_w + x0) / 4u] = vec4<f32>({vals}) + b;")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines)


def tile_major_store():
    """store_tile_major36: one workgroup's 32 rows x 8 tiles of transformed tiles into the
    tile-major planes of `out`, staged through the workgroup array `tm` (9 planes at a time) so
    that each subgroup writes 32 consecutive rows (128 bytes) of one tile."""
    lines = [
        "// The 36 values v of element (row0 + lid / 8, tile0 + lid % 8) of a workgroup's block of 32",
        "// rows × 8 tiles into the tile-major planes of `out` [ξ, cols, rows], through `tm` in four",
        "// rounds of 9 planes: invocation lid writes row row0 + lid % 32 of tile tile0 + lid / 32, so a",
        "// subgroup's stores are 32 consecutive rows. Rows from p.rows and tiles from p.cols are left",
        "// out. Slots are tile·36 + row: both the writes into `tm` and the reads hit 32 banks.",
        "fn store_tile_major36(v: array<f32, 36>, lid: u32, row0: u32, tile0: u32) {",
        "    let slot_in = (lid % 8u) * 36u + lid / 8u;",
        "    let slot_out = (lid / 32u) * 36u + lid % 32u;",
        "    let row = row0 + lid % 32u;",
        "    let tile = tile0 + lid / 32u;",
        "    let inside = row < p.rows && tile < p.cols;",
        "    let at = tile * p.rows + row;",
        "    let plane = p.rows * p.cols;",
    ]
    for rnd in range(4):
        for q in range(9):
            lines.append(f"    tm[{q * 288}u + slot_in] = v[{rnd * 9 + q}];")
        lines.append("    workgroupBarrier();")
        lines.append("    if inside {")
        for q in range(9):
            lines.append(f"        out[at + {rnd * 9 + q}u * plane] = tm[{q * 288}u + slot_out];")
        lines.append("    }")
        lines.append("    workgroupBarrier();")
    lines.append("}")
    return "\n".join(lines)


def generate():
    parts = [
        "// Generated by tools/gen/winograd4.py: edit that script, not this file.",
        "//",
        "// The tile transforms of Winograd F(4×4, 3×3) for `winograd4.wgsl`, scalar straight-line",
        "// code on row-major tiles (ξ = 6·k + l for a 6×6 one), and the tile loads and plane reads",
        "// and writes around them. They use `tap`, `TileOrigin`, `p`, `src` and `out` of",
        "// `lib/winograd_tiles.wgsl`; the vec4 output store and the staged tile-major store, `out4` and",
        "// `tm` of `winograd4.wgsl`.",
        "",
        two_sided("input_transform4", "V = Bᵀ d B of a 6×6 input tile d.", BT, "d"),
        "",
        two_sided("filter_transform4", "U = G g Gᵀ of a 3×3 filter g.", G, "g"),
        "",
        two_sided("output_transform4", "Y = Aᵀ m A: the 4×4 output tile of the 36 products m.", AT, "m"),
        "",
        two_sided(
            "grad_transform4",
            "Z = A e Aᵀ of a 4×4 output-gradient tile e (the weight gradient's left operand).",
            transpose(AT),
            "e",
        ),
        "",
        two_sided(
            "filter_grad_transform4",
            "dw = Gᵀ dU G: the 3×3 filter gradient of the 36 summed products dU.",
            transpose(G),
            "u",
        ),
        "",
        loads("load_tile6", "The 6×6 input tile at o.", 6),
        "",
        loads("load_tile4", "The 4×4 output-gradient tile at o.", 4),
        "",
        planes(36, True),
        "",
        planes(36, False),
        "",
        output_store(),
        "",
        vector_output_store(),
        "",
        tile_major_store(),
        "",
    ]
    return "\n".join(parts)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rumus", "shaders")
    # `--out DIR` writes the file into DIR instead of rumus/shaders (tests/house/ compares them).
    out = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--out" else here
    path = os.path.join(out, "lib", "winograd4_transforms.wgsl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(generate())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
