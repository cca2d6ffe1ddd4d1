"""gpu_agent/build.py: every sample compiles for sm_90a and sm_100a; failures are clear and
say whose they are (the agent's toolchain, or the submission).

The compile tests need nvcc (skipped, saying so, where it is absent). The rest use a fake
nvcc script, so they run everywhere.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpu_agent import build
from gpu_agent.backends.base import BackendError
from gpu_agent.samples import SAMPLES, load_sample

# The targets an H100/H200 and a B200 get (arch-specific: wgmma, TMA, setmaxnreg).
ARCHITECTURES = (build.target_architecture(9, 0), build.target_architecture(10, 0))
NVCC = build.nvcc_path()
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc not found (PATH, KERNELINDEX_NVCC, CUDA_HOME): compile tests skipped"
)


@pytest.fixture(scope="module")
def sample_builds() -> dict[tuple[str, str], build.BuildResult | BaseException]:
    """Every sample × architecture, compiled in parallel once for the module."""
    jobs = [(name, arch) for name in SAMPLES for arch in ARCHITECTURES]

    def compile_one(job: tuple[str, str]) -> build.BuildResult | BaseException:
        name, arch = job
        solution = load_sample(name).solution
        sources = {s["path"]: s["content"] for s in solution["sources"]}
        try:
            return build.compile_cubin(sources, solution["spec"]["entry_point"], arch)
        except BaseException as exc:  # reported per case below
            return exc

    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        return dict(zip(jobs, pool.map(compile_one, jobs), strict=True))


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_compiles(
    sample_builds: dict[tuple[str, str], build.BuildResult | BaseException], name: str, arch: str
) -> None:
    result = sample_builds[(name, arch)]
    if isinstance(result, BaseException):
        raise result
    assert result.cubin[:4] == b"\x7fELF"  # a cubin is an ELF image
    assert result.architecture == arch
    assert result.flags == ("-cubin", f"-arch={arch}", *build.NVCC_FLAGS)
    assert "--use_fast_math" not in result.flags
    assert result.function == load_sample(name).solution["spec"]["entry_point"].split("::")[1]
    # The extern "C" symbol is there unmangled, for cuModuleGetFunction.
    assert result.function.encode() in result.cubin
    assert "warning" not in result.log.lower(), result.log


@needs_nvcc
def test_compile_error_carries_nvccs_message() -> None:
    sources = {"kernel.cu": 'extern "C" __global__ void k(int* p) { p[0] = undefined_name; }\n'}
    with pytest.raises(build.BuildError) as caught:
        build.compile_cubin(sources, "kernel.cu::k", "sm_90")
    assert isinstance(caught.value, BackendError)
    assert "undefined_name" in str(caught.value)
    assert "nvcc failed" in str(caught.value)
    assert caught.value.agent_fault is False  # the submission's fault: it may refute
    assert "the submission does not build" in str(caught.value)


@needs_nvcc
def test_hopper_only_instructions_build_for_the_arch_specific_target() -> None:
    # setmaxnreg (like wgmma) exists only on sm_90a: plain sm_90 refuses it.
    sources = {
        "kernel.cu": 'extern "C" __global__ void __launch_bounds__(128) k(int* p) {\n'
        '  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\\n");\n'
        "  p[threadIdx.x] = 1;\n}\n"
    }
    target = build.target_architecture(9, 0)
    assert target == "sm_90a"
    assert build.compile_cubin(sources, "kernel.cu::k", target).architecture == "sm_90a"
    with pytest.raises(build.BuildError):
        build.compile_cubin(sources, "kernel.cu::k", "sm_90")


@needs_nvcc
def test_missing_host_compiler_is_the_agents_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    assert NVCC is not None
    monkeypatch.setenv("PATH", "/nonexistent")  # nvcc by absolute path, no gcc anywhere
    build.toolchain_works.cache_clear()
    try:
        with pytest.raises(build.BuildError) as caught:
            build.compile_cubin(
                {"kernel.cu": 'extern "C" __global__ void k() {}\n'},
                "kernel.cu::k",
                "sm_90a",
                nvcc=str(Path(NVCC).resolve()),
            )
    finally:
        build.toolchain_works.cache_clear()
    assert caught.value.agent_fault is True
    assert "agent toolchain failure" in str(caught.value)


@needs_nvcc
def test_headers_among_the_sources_can_be_included() -> None:
    sources = {
        "kernel.cu": '#include "util/scale.cuh"\n'
        'extern "C" __global__ void k(float* p) { p[threadIdx.x] *= kScale; }\n',
        "util/scale.cuh": "constexpr float kScale = 2.0f;\n",
    }
    result = build.compile_cubin(sources, "kernel.cu::k", "sm_90")
    assert result.entry_file == "kernel.cu"


def test_nvcc_version_is_read(fake_nvcc: Path) -> None:
    assert build.nvcc_version(str(fake_nvcc)) == "13.0.88"


# --- without a real nvcc ---------------------------------------------------------------------


@pytest.fixture
def fake_nvcc(tmp_path: Path) -> Path:
    """An "nvcc" that answers --version, then sleeps if asked to, else writes a fake cubin."""
    script = tmp_path / "nvcc"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        "args = sys.argv[1:]\n"
        "if args == ['--version']:\n"
        "    print('Cuda compilation tools, release 13.0, V13.0.88'); sys.exit(0)\n"
        "src = open(args[-1]).read()\n"
        "if 'SLEEP' in src: time.sleep(30)\n"
        "if 'FAIL' in src:\n"
        "    sys.stderr.write('kernel.cu(1): error: FAIL is not allowed\\n' + 'x' * 20000)\n"
        "    sys.exit(2)\n"
        "open(args[args.index('-o') + 1], 'wb').write(b'\\x7fELF' + ' '.join(args).encode())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def broken_nvcc(tmp_path: Path) -> Path:
    """An "nvcc" that knows its version but builds nothing (as without a host compiler)."""
    script = tmp_path / "nvcc"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('Cuda compilation tools, release 13.0, V13.0.88'); sys.exit(0)\n"
        "sys.stderr.write('nvcc fatal   : Failed to preprocess host compiler properties.\\n')\n"
        "sys.exit(1)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize(
    ("capability", "target"),
    [
        ((9, 0), "sm_90a"),
        ((10, 0), "sm_100a"),
        ((10, 3), "sm_103a"),
        ((12, 0), "sm_120a"),
        ((8, 9), "sm_89"),
        ((8, 0), "sm_80"),
        ((7, 5), "sm_75"),
    ],
)
def test_target_is_arch_specific_where_the_architecture_has_it(
    capability: tuple[int, int], target: str
) -> None:
    assert build.target_architecture(*capability) == target
    assert build.check_architecture(target) == target


def test_a_failing_toolchain_is_the_agents_fault(broken_nvcc: Path) -> None:
    build.toolchain_works.cache_clear()
    with pytest.raises(build.BuildError) as caught:
        build.compile_cubin({"kernel.cu": "k"}, "kernel.cu::k", "sm_90a", nvcc=str(broken_nvcc))
    assert caught.value.agent_fault is True
    assert "cannot build a trivial kernel" in str(caught.value)
    assert "host compiler" in caught.value.log


def test_a_source_that_does_not_compile_is_the_submissions_fault(fake_nvcc: Path) -> None:
    build.toolchain_works.cache_clear()
    with pytest.raises(build.BuildError) as caught:
        build.compile_cubin({"kernel.cu": "FAIL"}, "kernel.cu::k", "sm_90a", nvcc=str(fake_nvcc))
    assert caught.value.agent_fault is False  # the fake builds the probe: the source is at fault


def test_command_pins_flags_and_exact_arch(fake_nvcc: Path) -> None:
    result = build.compile_cubin({"kernel.cu": "k"}, "kernel.cu::k", "sm_90a", nvcc=str(fake_nvcc))
    argv = result.cubin[4:].decode()
    assert "-cubin -arch=sm_90a -O3 -std=c++17 -lineinfo" in argv
    assert result.flags == ("-cubin", "-arch=sm_90a", "-O3", "-std=c++17", "-lineinfo")
    assert result.nvcc_version == "13.0.88"


def test_failure_log_is_bounded_and_keeps_the_error(fake_nvcc: Path) -> None:
    with pytest.raises(build.BuildError) as caught:
        build.compile_cubin({"kernel.cu": "FAIL"}, "kernel.cu::k", "sm_90", nvcc=str(fake_nvcc))
    assert "exit 2" in str(caught.value)
    assert len(caught.value.log) <= build.MAX_LOG_CHARS + 100
    assert "characters cut" in caught.value.log


def test_timeout_is_an_error(fake_nvcc: Path) -> None:
    started = time.monotonic()
    with pytest.raises(build.BuildError, match="did not finish"):
        build.compile_cubin(
            {"kernel.cu": "SLEEP"}, "kernel.cu::k", "sm_90", nvcc=str(fake_nvcc), timeout_s=1
        )
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "sm_9", "sm_90;rm", "", "sm_100x"])
def test_architecture_must_be_exact(arch: str, fake_nvcc: Path) -> None:
    with pytest.raises(build.BuildError, match="architecture") as caught:
        build.compile_cubin({"kernel.cu": "k"}, "kernel.cu::k", arch, nvcc=str(fake_nvcc))
    assert caught.value.agent_fault is True  # the target comes from the device


@pytest.mark.parametrize(
    "path", ["/etc/passwd.cu", "../x.cu", "a/../b.cu", "a//b.cu", "./k.cu", "notes.txt"]
)
def test_source_paths_must_be_safe(path: str, fake_nvcc: Path) -> None:
    with pytest.raises(build.BuildError, match="source"):
        build.compile_cubin(
            {"kernel.cu": "k", path: "x"}, "kernel.cu::k", "sm_90", nvcc=str(fake_nvcc)
        )


def test_entry_points() -> None:
    one = {"kernel.cu": "", "h.cuh": ""}
    assert build.split_entry_point("kernel.cu::run", one) == ("kernel.cu", "run")
    assert build.split_entry_point("run", one) == ("kernel.cu", "run")
    with pytest.raises(build.BuildError, match="names no file"):
        build.split_entry_point("run", {"a.cu": "", "b.cu": ""})
    with pytest.raises(build.BuildError, match="not among the sources"):
        build.split_entry_point("other.cu::run", one)
    with pytest.raises(build.BuildError, match="not a C identifier"):
        build.split_entry_point("kernel.cu::run(x)", one)
    with pytest.raises(build.BuildError, match=r"not a \.cu file"):
        build.split_entry_point("h.cuh::run", one)


def test_missing_nvcc_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNELINDEX_NVCC", str(tmp_path / "no-such-nvcc"))
    assert build.nvcc_path() is None
    with pytest.raises(build.BuildError, match="nvcc not found") as caught:
        build.compile_cubin({"kernel.cu": "k"}, "kernel.cu::k", "sm_90")
    assert caught.value.agent_fault is True
