"""kiln export / run / dump: the command-line face of the exporter and the runtime."""
from __future__ import annotations

import subprocess
import sys
import traceback

import click

from .loading import load_program_class


def _error(message: str) -> None:
    """Prints `kiln: error: MESSAGE` as one line."""
    one_line = " ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    click.echo(f"kiln: error: {one_line}", err=True)


class _Group(click.Group):
    """Every error is one line `kiln: error: ...` and a non-zero exit (the traceback only with --verbose)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        verbose = "--verbose" in args
        try:
            code = super().main(args, prog_name or "kiln", complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:  # usage errors: a missing file, option or class
            if verbose:
                traceback.print_exc()
            _error(e.format_message())
            code = e.exit_code
        except click.Abort:
            _error("aborted")
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:  # every failure becomes one line, not a traceback
            if ctx.obj and ctx.obj.get("verbose"):
                traceback.print_exc()
            notes = "".join(f" {note}" for note in getattr(e, "__notes__", ()))
            _error(f"{type(e).__name__}: {str(e) or type(e).__name__}{notes}")
            ctx.exit(1)


def _version_message() -> str:
    from kiln import __version__
    from kiln.vm._generated.constants import FORMAT_VERSION

    return f"kiln {__version__} (module format {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]})"


def _print_version(ctx, _param, value):
    if value and not ctx.resilient_parsing:
        click.echo(_version_message())
        ctx.exit()


@click.group(cls=_Group)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print kiln's version and the module format version it writes.")
@click.option("--verbose", is_flag=True, help="Show full tracebacks on errors; export also prints each stage's time.")
@click.pass_context
def main(ctx, verbose):
    """kiln: compile Python array programs into .vmfb modules and run them."""
    ctx.obj = {"verbose": verbose}


def _progress_line(name: str, seconds: float, detail: str) -> None:
    """On a terminal, the stage export just finished, over the previous one (one line, rewritten)."""
    text = f"{name} {detail}".strip()
    click.echo(f"\r\033[Kkiln export: {text[:100]} ({seconds * 1000:.0f} ms)", nl=False, err=True)


@main.command()
@click.argument("program")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Module file to write (.vmfb); required unless --print is given.")
@click.option("--ir", "print_ir", is_flag=True, help="Also print the program's IR.")
@click.option("--print", "print_stages", multiple=True, metavar="STAGE",
              type=click.Choice(["trace", "passes", "fusion", "strategy", "schedule", "llvm", "asm", "module"]),
              help="Print a compilation stage to stdout (repeatable): trace, passes, fusion, strategy (each "
                   "dispatch's kernel strategy and plan), schedule, llvm, asm, module (as kiln dump).")
@click.option("--target", "target", metavar="TRIPLE|host|portable",
              help="Machines the module runs on: 'portable' (default, or $KILN_TARGET: kernel variants for "
                   "x86-64-v2/v3/v4 or aarch64 NEON/SVE, the best chosen at load), 'host' (this machine "
                   "exactly) or an LLVM triple (its portable variants, or one CPU with --cpu/--features).")
@click.option("--cpu", metavar="NAME", help="LLVM CPU name for --target TRIPLE (x86-64-v3, znver4, neoverse-v1, ...).")
@click.option("--features", metavar="+a,-b", help="LLVM CPU features to add (+) or remove (-) for --target TRIPLE.")
@click.pass_context
def export(ctx, program, output, print_ir, print_stages, target, cpu, features):
    """Trace and compile PROGRAM (FILE.py:ClassName or package.module:ClassName) into a module file.

    By default the module is portable (docs/targets.md): for x86-64 it carries kernel variants for
    x86-64-v2, v3 (AVX2, FMA) and v4 (AVX-512) and the runtime runs the best one the CPU supports.

    With --verbose (before the command: kiln --verbose export ...), prints the time of each stage:
    load, trace, passes, fusion, each kernel (compiled or read from the cache), link, lower,
    serialize, write. With --verbose or on a terminal it also says which kernel builds it wrote
    ("kernel builds: x86-64-v4, x86-64-v3, x86-64-v2 (x86_64-unknown-linux-gnu)").
    """
    from kiln import Program
    from kiln.compiler.timing import recording, stage

    from kiln.compiler.target import Target, TargetError

    if output is None and not print_stages:
        raise click.UsageError("Missing option '-o' / '--output' (or --print STAGE to print a stage only).")
    if (cpu is not None or features is not None) and target is None:
        raise click.UsageError("--cpu and --features need --target TRIPLE (the machine they describe)")
    try:
        chosen = Target.parse(target, cpu, features) if target is not None else None
    except TargetError as e:
        raise click.BadParameter(str(e), param_hint="--target") from None
    verbose = bool(ctx.obj and ctx.obj.get("verbose"))
    progress = _progress_line if sys.stderr.isatty() and not verbose else None
    with recording(progress) as timings:
        with stage("load", program):
            cls = load_program_class(program)
        artifact = Program.get_compiled_artifact(cls, target=chosen)
        if print_ir:
            click.echo(Program.get_ir(cls))
        if output is not None:
            with stage("write", output):
                artifact.save(output)
    if progress:
        click.echo("\r\033[K", nl=False, err=True)  # the progress line gives way to the result
    if print_stages:
        from kiln.compiler.stage_print import stage_text

        result = cls._kiln_result_for(chosen)
        for name in print_stages:
            click.echo(f"=== {name} ===")
            click.echo(stage_text(result, name))
    if output is not None:
        if verbose or sys.stdout.isatty():
            click.echo(_kernel_builds_line(artifact.bytes))
        click.echo(f"wrote {output} ({len(artifact.bytes)} bytes)")
    if verbose:
        click.echo("export stages (wall clock):")
        click.echo(timings.format())


def _kernel_builds_line(module: bytes) -> str:
    """`kernel builds: x86-64-v4, x86-64-v3, x86-64-v2 (x86_64-unknown-linux-gnu)`: the builds of the module's
    kernels, best first (format 2.4 variants, then the base image), and their triples."""
    from kiln.vm.reader import read_module

    m = read_module(module)
    images = [v.image for v in m.kernel_variants] + list(m.kernel_images)
    if not images:
        return "kernel builds: none (the module has no kernels)"
    names = list(dict.fromkeys(img.variant or img.target_triple for img in images))
    triples = ", ".join(dict.fromkeys(img.target_triple for img in images))
    return f"kernel builds: {', '.join(names)} ({triples})"


# Every option of kiln-run, which `kiln run` passes on verbatim (kiln-run checks the values, and its error lines
# become kiln's): (option, short form, kind: "value", "values" (repeatable) or "flag", [metavar,] help).
KILN_RUN_OPTIONS = [
    ("--function", "-f", "value", "NAME", "Exported function to call."),
    ("--input", "-i", "values", "VALUE",
     "An argument, in order: 2x3xf32=1,2,3,4,5,6, @x.npy, @xs.npz (each array of the archive, in order) or "
     "@xs.npz:NAME."),
    ("--output", "-o", "values", "@PATH", "Write a result to @y.npy (one per result), or every result to one @ys.npz."),
    ("--expected_output", None, "values", "VALUE",
     "Compare a result (one per result; the syntax of --input, \"(ignored)\" to skip one) instead of printing it; "
     "exit 1 on a mismatch."),
    ("--expected_f16_threshold", None, "value", "T", "Largest matching absolute difference for f16 and bf16 (0.001)."),
    ("--expected_f32_threshold", None, "value", "T", "Largest matching absolute difference for f32 and c64 (0.0001)."),
    ("--expected_f64_threshold", None, "value", "T", "Largest matching absolute difference for f64 and c128 (0.0001)."),
    ("--workers", None, "value", "N", "Worker threads (default: one per core; 1: none)."),
    ("--benchmark", None, "value", "N", "Time N calls and print their statistics instead of the results."),
    ("--warmup", None, "value", "K", "Uncounted calls before the timed ones (default 1)."),
    ("--benchmark_format", None, "value", "text|json", "The benchmark's statistics as text (the default) or JSON."),
    ("--trace", None, "value", "PATH.json", "Write a Chrome/Perfetto trace of the calls (calls, dispatches, "
     "allocations, global stores)."),
    ("--perf-map", None, "flag", "Append the kernels to /tmp/perf-<pid>.map so that perf report names them."),
    ("--print_statistics", None, "flag", "Print each kernel's dispatches, time, share and GB/s, and the memory "
     "high-water mark."),
    ("--timeout", None, "value", "SECONDS", "Stop a call that runs longer."),
    ("--max-steps", None, "value", "N", "Stop a call after N bytecode instructions."),
    ("--caller-transient", None, "flag", "Give the function transient memory kiln-run allocates itself "
     "(kiln_context_set_transient_storage)."),
    ("--globals-in", None, "value", "PATH.npz", "Set the globals from a .npz before calling."),
    ("--globals-out", None, "value", "PATH.npz", "Save every global to a .npz after calling."),
    ("--globals-partial", None, "flag", "Let --globals-in hold a subset of the globals."),
    ("--list", None, "flag", "Print the module's functions and globals."),
    ("--disassemble", None, "flag", "Print every function's bytecode."),
]


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _kiln_run_options(command):
    """Declares KILN_RUN_OPTIONS on `command` (as text: kiln-run checks them)."""
    for option, short, kind, *rest in reversed(KILN_RUN_OPTIONS):
        decls = [option, *([short] if short else []), _dest(option)]
        if kind == "flag":
            command = click.option(*decls, is_flag=True, help=rest[0])(command)
        else:
            command = click.option(*decls, multiple=kind == "values", metavar=rest[0], help=rest[1])(command)
    return command


@main.command()
@click.argument("module", type=click.Path(exists=True, dir_okay=False))
@_kiln_run_options
def run(module, **options):
    """Run a function of MODULE in the C runtime: kiln-run with the same options, syntax and output."""
    from kiln.vm._native import kiln_run_path

    argv = [kiln_run_path(), f"--module={module}"]
    for option, _, kind, *_ in KILN_RUN_OPTIONS:
        value = options[_dest(option)]
        if kind == "flag":
            argv += [option] if value else []
        elif kind == "values":
            argv += [f"{option}={v}" for v in value]
        elif value is not None:
            argv.append(f"{option}={value}")
    sys.stdout.flush()
    proc = subprocess.run(argv, stderr=subprocess.PIPE, text=True, errors="replace")
    for line in proc.stderr.splitlines():  # kiln-run's errors are kiln's
        click.echo(line.replace("kiln-run: error: ", "kiln: error: ", 1), err=True)
    if proc.returncode:
        sys.exit(proc.returncode)


@main.command()
@click.argument("program")
@click.option("-f", "--function", required=True, help="Exported function to call.")
@click.option("-i", "--input", "inputs", multiple=True, metavar="VALUE",
              help="An argument, in order, as kiln run takes it: 2x3xf32=1,2,3,4,5,6, @x.npy, @xs.npz or @xs.npz:NAME.")
@click.option("--rtol", type=float, default=None,
              help="Relative tolerance (of |reference|) for every float output; the propagated rounding bound "
                   "still applies (default: per dtype, docs/accuracy.md).")
@click.option("--workers", type=int, default=0, help="Worker threads (default: one per core; 1: none).")
@click.option("--globals-in", "globals_in", metavar="PATH.npz",
              help="Set the globals from a .npz (as kiln-run --globals-in and Program.save_globals write it) first.")
@click.option("--globals-partial", is_flag=True, help="Let --globals-in hold a subset of the globals.")
@click.pass_context
def check(ctx, program, function, inputs, rtol, workers, globals_in, globals_partial):
    """Run FUNCTION of PROGRAM (as for export) in the C runtime and compare every dispatch's outputs with the
    eager reference interpreter (float64 where the op allows) on that dispatch's own inputs: one line per
    dispatch, then the first dispatch beyond tolerance and the source line of its first op. Exit 1 when
    one is."""
    from kiln.program.check import CheckError, check_program, parse_input
    from kiln.vm.runtime import KilnRuntimeError

    cls = load_program_class(program)
    try:
        args = [a for text in inputs for a in parse_input(text)]
        report = check_program(cls, function, args, rtol=rtol, workers=workers, globals_in=globals_in,
                               globals_partial=globals_partial)
    except (CheckError, KilnRuntimeError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(report.text())
    if not report.passed:
        ctx.exit(1)


@main.command()
@click.argument("module", type=click.Path(exists=True, dir_okay=False))
@click.option("--dot", is_flag=True, help="Print each function's dataflow (kernels, buffers, globals) for Graphviz.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML page: each function's dataflow picture and bytecode, the kernels.")
def dump(module, dot, html_path):
    """Print MODULE's provenance, functions, globals, kernels and disassembled bytecode (with --dot, its
    dataflow as a Graphviz digraph: `kiln dump --dot m.vmfb | dot -Tsvg > m.svg`)."""
    from kiln.vm.reader import dump_text

    with open(module, "rb") as f:
        data = f.read()
    if html_path:
        from kiln.vm.html import module_html

        with open(html_path, "w", encoding="utf-8") as f:
            f.write(module_html(data))
        click.echo(f"wrote {html_path}")
        return
    if dot:
        from kiln.vm.graph import module_dot

        click.echo(module_dot(data), nl=False)
        return
    click.echo(dump_text(data))


@main.command()
@click.argument("action", type=click.Choice(["info", "clear", "trim"]), default="info")
def cache(action):
    """Show (info), empty (clear) or trim to its size limit (trim) the persistent kernel cache
    ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; limit $KILN_CACHE_MAX_SIZE)."""
    from kiln.compiler.cache import default_cache

    kernels = default_cache()
    if kernels is None:
        click.echo("the kernel cache is off (KILN_CACHE)")
        return
    if action == "clear":
        click.echo(f"freed {kernels.clear()} bytes in {kernels.directory}")
    elif action == "trim":
        click.echo(f"freed {kernels.trim()} bytes in {kernels.directory}")
    used = kernels.usage()
    click.echo(f"{kernels.directory}: {used.entries} kernels, {used.bytes} bytes (limit {kernels.max_bytes})")


if __name__ == "__main__":
    main()
