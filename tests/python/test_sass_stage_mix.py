"""tools/sass/sass_stage_mix.py without a GPU or the CUDA tools: the stage-mix regions of the decode
GEMM's source, the reader of `nvdisasm -gi` (source frames, labels), the main loop and the split
of its instructions into one stage and once per unit, on a hand-written disassembly; and the
ptxas -v reader it shares with tools/sass/sass_facts.py."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from conftest import load_script as load


K = "/t/kernels/gemm/decode_kernels.cuh"

# A kernel whose main loop (0x0030 .. 0x00b0) has one instruction inlined from a per-unit region
# (line 20, inside lines 19-21) and one on the one-line region (line 40); a short loop without
# HMMA before it; code after the loop.
DISASM = f"""
.text._Z6kernelv:
	//## File "{K}", line 5
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
	//## File "{K}", line 6
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/              @P0 BRA `(.L_x_0) ;
.L_x_1:
	//## File "{K}", line 30
        /*0030*/                   LDGSTS.E.BYPASS.LTC256B.128 [R3], desc[UR4][R4.64] ;
	//## File "{K}", line 31
        /*0040*/                   HMMA.16816.F32.BF16 R8, R12, R16, R8 ;
        /*0050*/                   HMUL2.BF16_V2 R5, R5, R6 ;
	//## File "/t/kernels/gemm/mma.cuh", line 3 inlined at "{K}", line 20
	//## File "{K}", line 20
        /*0060*/                   IMAD R7, R7, 0x40, RZ ;
	//## File "{K}", line 40
        /*0070*/                   SEL R9, R9, RZ, P1 ;
	//## File "{K}", line 32
        /*0080*/                   LOP3.LUT R10, R10, 0xf, RZ, 0xc0, !PT ;
        /*0090*/                   NOP ;
        /*00a0*/                   FMUL R11, R11, R12 ;
        /*00b0*/              @P1 BRA `(.L_x_1) ;
	//## File "{K}", line 50
        /*00c0*/                   EXIT ;
"""

MARKED_SOURCE = "\n".join(
    ["// line %d" % i for i in range(1, 19)] +
    ["  auto f = [&] { // stage-mix: unit begin", "    work();", "  }; // stage-mix: unit end"] +
    ["// line %d" % i for i in range(22, 40)] +
    ["  int x = y; // stage-mix: unit line"])


def test_unit_regions_are_the_marked_lines():
    m = load("sass_stage_mix")
    assert m.unit_lines(MARKED_SOURCE) == {19, 20, 21, 40}
    for bad in ("a // stage-mix: unit end",
                "a // stage-mix: unit begin\nb // stage-mix: unit begin",
                "a // stage-mix: unit begin"):
        with pytest.raises(ValueError):
            m.unit_lines(bad)


def test_the_decode_kernel_source_has_closed_regions():
    m = load("sass_stage_mix")
    with open(os.path.join(ROOT, m.MARKED)) as f:
        lines = m.unit_lines(f.read())
    assert len(lines) > 50  # begin_unit, the unit's end, its first stage, the next tile


def test_the_reader_keeps_frames_and_resolves_labels():
    m = load("sass_stage_mix")
    ins = m.parse_nvdisasm(DISASM)["_Z6kernelv"]
    assert len(ins) == 13
    addr, op, operands, frames = ins[2]
    assert (addr, op) == (0x20, "BRA") and "0x10" in operands  # the guard is dropped
    assert ins[6][3] == [("/t/kernels/gemm/mma.cuh", 3), (K, 20), (K, 20)]
    assert ins[8][3] == [(K, 32)] and ins[9][3] == [(K, 32)]  # frames hold until new ones come


def test_one_stage_is_the_main_loop_outside_the_unit_regions():
    m = load("sass_stage_mix")
    ins = m.parse_nvdisasm(DISASM)["_Z6kernelv"]
    assert m.main_loop(ins) == (3, 11)  # the loop with the HMMA, not the first one
    stage, unit = m.stage_mix(ins, "kernels/gemm/decode_kernels.cuh", m.unit_lines(MARKED_SOURCE))
    assert unit == 2  # the inlined IMAD (line 20) and the SEL (line 40)
    assert stage["total"] == 6  # LDGSTS, HMMA, HMUL2, LOP3, FMUL, BRA; the NOP is not counted
    assert (stage["LDGSTS"], stage["HMMA"], stage["HMUL2"], stage["LOP3"]) == (1, 1, 1, 1)
    assert stage["IMAD"] == 0 and stage["other"] == 2


def test_the_full_issue_bound():
    m = load("sass_stage_mix")
    # 4 instructions a clock per SM: 2048 bytes in 128 instructions are 64 B per clock per SM,
    # 4x the 16 B per clock per SM of 4200 GB/s on 132 SMs at 1.98 GHz (4.18 TB/s).
    assert m.bound("bf16 tile 8", 128, 4200, 132, 1.98) == pytest.approx(398.2, abs=0.1)
    # fp4 stages carry 256 bytes of scales as well.
    assert m.bound("fp4 tile 8", 576, 4200, 132, 1.98) == pytest.approx(99.6, abs=0.1)
    assert m.kernel_label("_ZN6moefin4gemm25decode_gemm_tscale_kernelILi1ELb0EEEvNS0_16Decode") \
        == "fp4 tile 8 tscale"
    assert m.kernel_label("_ZN6moefin4gemm25decode_gemm_tscale_kernelILi2ELb1EEEvNS0_16Decode") \
        == "fp4 tile 16 tscale lean"
    assert m.kernel_label("_ZN6moefin4gemm24decode_gemm_wpack_kernelILi1ELb0EEEvNS0_16Decode") \
        == "fp4 tile 8 wpack"
    assert m.kernel_label("_ZN6moefin4gemm23decode_gemm_wide_kernelILi2ELb1ELi3EEEvNS0_16Decode") \
        == "fp4 tile 16 wide lean"
    assert m.kernel_label("_ZN6moefin4gemm23decode_gemm_wide_kernelILi1ELb0ELi2EEEvNS0_16Decode") \
        == "fp4 tile 8 wide cta2"
    assert m.kernel_label("_ZN6moefin4gemm24decode_gemm_tiles_kernelILi1ELb1ELi2EEEvNS0_16Decode") \
        == "fp4 tile 8 tiles lean cta2"
    # The wide loop streams two warp-stages a turn: counts are per warp-stage, to the half.
    assert m.per_warp_stage(710, 2) == 355 and m.per_warp_stage(709, 2) == 354.5
    assert m.per_warp_stage(403, 1) == 403
    assert m.kernel_label("_ZN6moefin4gemm18decode_gemm_kernelILNS0_12WeightFormatE1ELi2ELb0EEEv") \
        == "fp4 tile 16 loads-only"
    assert m.kernel_label("_ZN6moefin4gemm15fill_fp4_kernelEPhS1_Pf") is None


def test_ptxas_spills_count_although_printed_before_the_registers():
    sf = load("sass_facts")
    text = """ptxas info    : Compiling entry function '_Z1av' for 'sm_90'
ptxas info    : Function properties for _Z1av
    8 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8 bytes cumulative stack size
ptxas info    : Compiling entry function '_Z1bv' for 'sm_90'
ptxas info    : Function properties for _Z1bv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 1024 bytes smem
"""
    assert sf.parse_ptxas(text) == {"_Z1av": [128, 0, 12], "_Z1bv": [40, 1024, 0]}


def test_the_tool_on_this_tree_counts_each_kernel_s_stage(tmp_path):
    # The real compile and disassembly (nvcc and nvdisasm, both installed by scripts/setup.sh):
    # the per-stage counts must show the loop's fixed structure, or the main loop or the unit
    # regions were found wrongly. A stage is 128 k (fp4) or 32 k (bf16) of 2 m16 tiles: 16 or 4
    # MMAs per n8 token tile; fp4 dequantizes 64 pairs with one HMUL2 each.
    m = load("sass_stage_mix")
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    nvdisasm = os.environ.get("NVDISASM", os.path.join(ROOT, ".deps", "tools", "bin", "nvdisasm"))
    if not (os.access(nvcc, os.X_OK) and os.access(nvdisasm, os.X_OK)):
        pytest.skip("nvcc or nvdisasm not installed (scripts/setup.sh installs nvdisasm)")
    out = tmp_path / "decode_sass.txt"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sass", "sass_stage_mix.py"),
                    "--out", str(out), "--nvcc", nvcc, "--nvdisasm", nvdisasm], check=True,
                   capture_output=True, text=True)
    lines = out.read_text().splitlines()
    head = lines.index(next(x for x in lines if x.startswith("kernel")))
    cols = lines[head].split("  ")
    cols = [c.strip() for c in cols if c.strip()]
    rows = {}
    for line in lines[head + 1:]:
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        rows[cells[0]] = dict(zip(cols, cells))
    assert set(rows) == {"bf16 tile 8", "bf16 tile 16", "bf16 tile 16 loads-only", "fp4 tile 8",
                         "fp4 tile 16", "fp4 tile 16 loads-only", "fp4 tile 16 deep",
                         "fp4 tile 8 tscale", "fp4 tile 16 tscale", "fp4 tile 8 tscale lean",
                         "fp4 tile 16 tscale lean", "fp4 tile 8 wpack", "fp4 tile 16 wpack",
                         "fp4 tile 8 wpack lean", "fp4 tile 16 wpack lean"} | {
                             "fp4 tile %d %s%s%s" % (tile, kind, lean, cta2) for tile in (8, 16)
                             for kind in ("wide", "tiles")
                             for lean in ("", " lean") for cta2 in ("", " cta2")}
    # The chain at --ctas-per-sm 1 counts on every kernel up to finalize being resident at once
    # (gemm::chain_grid), with GEMM CTAs of two CTAs' registers at most: 128 a thread. Bounded for
    # one CTA (more registers), the one-CTA wide and tiles kernels took the race benchmark cell on
    # fp4 from 200/200 mismatching iterations to 0/200 on an H100. Every kernel a chain can
    # launch must hold to it; `deep` is `sweep gemm`'s alone.
    for label, r in rows.items():
        if "deep" not in label:
            assert int(r["regs"]) <= 128, (label, r["regs"])
        tiles = 1 if "tile 8" in label else 2
        loads_only = "loads-only" in label
        fp4 = label.startswith("fp4")
        wide = "wide" in label or "tiles" in label
        assert float(r["HMMA"]) == (0 if loads_only else (16 if fp4 else 4) * tiles), label
        if fp4 and not loads_only:
            assert float(r["HMUL2"]) >= 64, label
        # Weight copies: 4 a stage; fp4 scales: 2 more row-major, 1 tiled (wide: 1 for two
        # warp-stages, its lanes 16..31 copying the second's).
        tiled = "tscale" in label or "wpack" in label or wide
        scales = 0 if not fp4 else (0.5 if wide else 1) if tiled else 2
        assert float(r["LDGSTS"]) == 4 + scales, label
        assert float(r["per stage"]) > 0 and int(r["per unit"]) > 0, label
    # Packed values: the same stage with fewer integer instructions than tiled scales alone
    # (8 instead of 13 a word of 8 values; 16 words a warp-stage at either tile).
    for tile in (8, 16):
        for lean in ("", " lean"):
            packed = rows["fp4 tile %d wpack%s" % (tile, lean)]
            nibbles = rows["fp4 tile %d tscale%s" % (tile, lean)]
            saved = sum(int(nibbles[c]) - int(packed[c]) for c in ("LOP3", "IMAD", "SHF"))
            assert saved >= 16 * 4, (tile, lean, saved)
            # Two warp-stages a turn pay the stage's fixed work (copy bookkeeping, metadata,
            # look-ahead, wait, loop) once: at least 32 instructions a warp-stage fewer.
            for cta2 in ("", " cta2"):
                wide = rows["fp4 tile %d wide%s%s" % (tile, lean, cta2)]
                assert float(wide["per stage"]) <= int(packed["per stage"]) - 32, (tile, lean)
                # Tiled values: every copy of a warp-stage at an immediate offset from one
                # address, so no more instructions than on row-major values.
                tiles = rows["fp4 tile %d tiles%s%s" % (tile, lean, cta2)]
                assert float(tiles["per stage"]) <= float(wide["per stage"]), (tile, lean, cta2)
