"""The command line: parse, call one library function, turn typed errors into one line and an exit code.

``toktok train SOURCE... --out DIR --merges N`` trains and writes a tokenizer;
``toktok verify DIR [SOURCE...]`` checks tiktoken/HF id parity of a written tokenizer.
``toktok train --config run.yaml`` runs a config (phases, warm start); ``toktok -c run.yaml`` is
the same, as toktoktok's CLI; ``toktok convert SRC DST`` converts a tokenizer.json to a .tiktoken and back.
"""
from __future__ import annotations

import gc
import json
import re
import sys
from contextlib import contextmanager
from typing import List, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from .errors import ToktokError
from .progress import say_error


class _Commands(TyperGroup):
    """toktok's commands. toktoktok's whole CLI is ``toktoktok -c config.yaml``: ``toktok -c FILE
    ...`` runs ``toktok train -c FILE ...``. Text and flag options take their values as parsed
    (:func:`_take_as_parsed`); help loads its renderer light (:func:`_import_rich_utils_light`)."""

    def parse_args(self, ctx, args):
        if args and (args[0] in ("-c", "--config") or args[0].startswith(("--config=", "-c"))):
            args = ["train", *args]
        _take_as_parsed(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def format_help(self, ctx, formatter):
        _import_rich_utils_light()
        return super().format_help(ctx, formatter)

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            _take_as_parsed(cmd.get_params(ctx))
        return name, cmd, rest

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        """As Click's, but a usage error (an unknown option, a missing argument: ``toktok train
        -data.txt``) is one line naming it and what to do, as every error toktok prints."""
        try:  # Typer >= 0.20 carries its own copy of Click
            from typer._click import exceptions as cx
        except ImportError:  # pragma: no cover - an older Typer over Click itself
            from click import exceptions as cx

        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except cx.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except cx.UsageError as e:
            words = e.ctx.command_path.split()[1:] if e.ctx is not None else []
            hint = f"see {' '.join(['toktok', *words, '--help'])}"
            if isinstance(e, cx.NoSuchOption):
                hint += " (a path that starts with '-' is written ./-NAME)"
            message = f"{e.format_message().rstrip('.')}; {hint}"
            _say("error", "bold red", message)
            argv = kwargs.get("args") if kwargs.get("args") is not None else args[0] if args else sys.argv[1:]
            if _asks_json(argv):  # the stream's last line, as for any error
                print(json.dumps({"event": "error", "error": "UsageError", "message": " ".join(message.split()),
                                  "exit_code": e.exit_code}, ensure_ascii=False), file=sys.stderr, flush=True)
            sys.exit(e.exit_code)
        except cx.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


def _asks_json(args) -> bool:
    """Whether a command line asks for ``--progress json`` (read from the words, as Click could not)."""
    args = [str(a) for a in args or ()]
    return "--progress=json" in args or any(a == "--progress" and b == "json" for a, b in zip(args, args[1:]))


class _Command(TyperCommand):
    """A command of toktok's: its help rendered as Typer renders it, imported light."""

    def format_help(self, ctx, formatter):
        _import_rich_utils_light()
        return super().format_help(ctx, formatter)


class _AsParsed:
    """A parameter's value as Click parsed it: the text of an option, a flag's bool, a tuple of
    texts. A Typer that coerces through pydantic (0.29) otherwise builds a TypeAdapter per
    parameter to turn text into text, importing pydantic for it: 0.1-0.2 s of every ``toktok
    train``. A value of any other type (an environment variable's, say) goes through Typer's own
    coercion, as before."""

    def coerce(self, value, param, ctx):
        multiple = param.multiple or param.nargs == -1
        if value is None:
            return () if multiple else None
        want = param.type_descriptor.annotation
        if multiple and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return value
        if not multiple and want in (str, bool) and isinstance(value, want):
            return value
        from typer._coercion import build_runtime_param

        return build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx)


_AS_PARSED = _AsParsed()


def _take_as_parsed(params) -> None:
    """Each text, text-list or flag parameter of ``params`` takes its value as Click parsed it
    (:class:`_AsParsed`); others (``--slices N``) keep Typer's coercion. A Typer without
    per-parameter coercion (an older one, over Click's types) is left as it is."""
    from typing import get_args, get_origin

    for p in params:
        if getattr(p, "_runtime_param", False) is not None:
            continue  # an older Typer, or done already
        desc = p.type_descriptor
        ann = desc.annotation
        text_list = get_origin(ann) is list and get_args(ann) == (str,)
        if (ann in (str, bool) or text_list) and desc.file_annotation is None and desc.parameter_info.parser is None:
            p._runtime_param = _AS_PARSED


class _OnFirstUse(type):
    """A stand-in for class ``__name__`` of module ``_module``: calling it or reading an attribute
    (``Traceback.from_exception``) imports the module and hands over to the real class."""

    def _real(cls):
        import importlib

        return getattr(importlib.import_module(cls._module), cls.__name__)

    def __call__(cls, *args, **kwargs):
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name):
        return getattr(cls._real(), name)


#: What typer.rich_utils takes from the modules it imports for features toktok's help never uses.
_UNUSED_BY_HELP = {"rich.markdown": ("Markdown",), "rich.traceback": ("Traceback",)}


def _stand_in(name: str, classes: tuple[str, ...]):
    """A module ``name`` whose ``classes`` are :class:`_OnFirstUse` stand-ins; anything else read
    from it imports the real module."""
    import importlib
    import types

    mod = types.ModuleType(name)

    def attribute(attr: str):
        if attr in classes:
            return _OnFirstUse(attr, (), {"_module": name})
        if attr.startswith("__"):  # the import system asking (__path__): a module, not a package
            raise AttributeError(attr)
        if sys.modules.get(name) is mod:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attr)

    mod.__getattr__ = attribute
    return mod


def _import_rich_utils_light() -> None:
    """Import Typer's help renderer (``typer.rich_utils``) without what toktok's help never uses.

    It imports ``rich.markdown`` (markdown-it) and ``rich.traceback`` (Pygments, attrs) at its
    top, 0.05 s of each ``toktok --help``, for help written in Markdown and for pretty tracebacks:
    toktok's help is Rich markup and its tracebacks are plain. While it imports, those two modules
    are stand-ins (:func:`_stand_in`) whose classes load the real module on first use; then they
    are taken out of ``sys.modules``, so any later import gets the real ones. Example: ``toktok
    --help`` loads no markdown_it (tests/test_cli.py)."""
    if "typer.rich_utils" in sys.modules:
        return
    stand_ins = {name: _stand_in(name, classes) for name, classes in _UNUSED_BY_HELP.items() if name not in sys.modules}
    sys.modules.update(stand_ins)
    try:
        import typer.rich_utils  # noqa: F401
    except ImportError:  # pragma: no cover - a Typer without Rich help: nothing to import
        pass
    finally:
        for name, mod in stand_ins.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]


# Help texts are Rich markup (Typer's rich mode): a literal "[" is written "\\[" (tests check them all).
app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode="rich",
                  help="Exact, fast byte-level BPE training. `toktok -c run.yaml` is `toktok train --config run.yaml`.")


class _Console:
    """A console of :mod:`toktok.printed` (``err``, ``out``: what is printed is never markup), loaded
    on first use: Rich's import (~15 ms) is not on a run's way to its start. ``real``: the console."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def real(self):
        from . import printed

        return getattr(printed, self._name)

    def __getattr__(self, attr: str):
        return getattr(self.real, attr)


err, out = _Console("err"), _Console("out")


def _say(kind: str, style: str, msg: str) -> None:
    """``toktok: error: ...`` / ``toktok: warning: ...`` on stderr (:func:`toktok.printed.say`)."""
    from .printed import say

    say(kind, style, msg)


def literal(s, style: str = ""):
    """:func:`toktok.insight.report.literal` (a Rich ``Text``, never read as markup), loaded on first use."""
    from .insight.report import literal as text

    return text(s, style)


def _escape(markup: str, _sub=re.compile(r"(\\*)(\[[a-z#/@][^[]*?])").sub) -> str:
    """``rich.markup.escape`` (help texts are Rich markup), without importing Rich's markup
    parser (~10 ms of every command's start, Rich's text and styles with it); tests/test_cli.py
    holds it equal to Rich's on every help text."""
    markup = _sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", markup)
    return markup + "\\" if markup.endswith("\\") and not markup.endswith("\\\\") else markup


@contextmanager
def _warnings():
    """Print each ToktokWarning raised inside as ``toktok: warning: ...`` (and collect it in the
    list yielded); other warnings go on as usual."""
    import warnings

    from .errors import ToktokWarning

    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ToktokWarning)
        yield said  # an error inside is the one line printed: its warnings are dropped
    for w in caught:
        if issubclass(w.category, ToktokWarning):
            said.append(str(w.message))
            _say("warning", "yellow", str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _fail(e: BaseException, debug: bool) -> None:
    if debug:
        raise e
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    _say("error", "bold red", msg)
    raise typer.Exit(getattr(e, "exit_code", 2))


def _train_parameters() -> list:
    """``toktok train``'s parameters, made from the options (:data:`toktok.options.OPTIONS`): each
    option's flags, help and default; values are read as text and translated by the option."""
    import inspect

    from .options import FLAG, OPTION, PATHS, TOKENS, run_options

    P = inspect.Parameter
    params = [P("sources", P.KEYWORD_ONLY, annotation=Optional[List[str]],
                default=typer.Argument(None, help=_escape(OPTION["sources"].help.split("; from Python")[0])))]
    for opt in run_options():
        for key, (flag, help_) in opt.key_flags.items():
            params.append(P(key, P.KEYWORD_ONLY, annotation=Optional[str],
                            default=typer.Option(None, flag, help=_escape(help_))))
        if not opt.cli:
            continue
        if opt.kind in (TOKENS, PATHS):
            ann, default = List[str], typer.Option([], *opt.cli, help=_escape(opt.help), metavar=opt.metavar)
        elif opt.kind is FLAG:
            ann = Optional[bool] if opt.default is None else bool
            default = typer.Option(opt.default, *opt.cli, help=_escape(opt.help))
        else:
            ann, default = Optional[str], typer.Option(None, *opt.cli, help=_escape(opt.help), metavar=opt.metavar or opt.kind.metavar)
        params.append(P(opt.name, P.KEYWORD_ONLY, annotation=ann, default=default))
    params.append(P("quiet", P.KEYWORD_ONLY, annotation=bool,
                    default=typer.Option(False, "--quiet", "-q", help="No progress (unless --progress is given) and no merge log")))
    params.append(P("debug", P.KEYWORD_ONLY, annotation=bool,
                    default=typer.Option(False, "--debug", help="Show tracebacks")))
    return params


def _given(values: dict) -> dict:
    """The options given on the command line, translated by their options (sizes into ints, the
    roles into one mapping); -q is ``verbose`` false."""
    from .options import FLAG, OPTION, ROLES, SIZE, TOKENS

    given: dict = {}
    for name, v in values.items():
        if name in ROLES:
            if v is not None:
                given.setdefault("roles", {})[name] = v
            continue
        opt = OPTION[name]
        if v is None or v == [] or (opt.kind is FLAG and v is False and opt.default is False):
            continue
        # a size stays as written (for messages); the one check reads it into an int
        given[name] = v if opt.kind in (FLAG, TOKENS, SIZE) else opt.from_text(v)
    return given


def train(**values) -> None:
    """Train a byte-level BPE tokenizer and write .tiktoken + tokenizer.json with identical ids."""
    debug, quiet = values.pop("debug"), values.pop("quiet")
    sources, config = list(values.pop("sources") or []), values.pop("config")
    cfg, reporting = None, False
    try:
        from .api import read_soon, train_config
        from .config import build_config
        from .later import soon

        given = _given(values)
        if quiet:
            given["verbose"] = False
        cfg = build_config(config, sources, given)

        def log(line: str) -> None:  # data (tokens) printed as they are, never as markup
            err.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)

        # --progress (or progress:) wins; else -q / verbose: false is none, bars on a terminal, plain lines elsewhere
        mode = cfg.progress or ("none" if quiet or cfg.verbose is False else "rich" if err.is_terminal else "plain")
        reporting = True  # from here on the reporter ends the JSON stream, error included
        if mode == "json":  # a kernel cache's warning is a line of the stream too
            from . import prebuilt

            prebuilt.SAY = _json_warning
        with _without_pandas(cfg):
            read_soon(cfg)  # (a word-count table read while the pipeline is imported)
            soon("toktok.printed")  # (the summary's Rich, imported beside the merge loop)
            _import_pipeline()
            summary = train_config(cfg, progress=mode, log=log, console=err.real if mode == "rich" else None)
    except ToktokError as e:
        if not reporting and "json" in (values.get("progress"), cfg and cfg.progress):
            say_error(e)
        _fail(e, debug)
        return
    except KeyboardInterrupt:
        from .rundir import interrupted_run

        kept = interrupted_run(cfg.layout().folder) if cfg is not None else None
        if kept is not None:
            err.print(literal(f"toktok: interrupted; the output folder is unchanged and the progress so far is kept in "
                              f"{kept} (rerun with --resume to continue from the last checkpoint)"), soft_wrap=True)
        else:
            err.print("toktok: interrupted before the first checkpoint; nothing was kept and the output folder "
                      "is unchanged (rerun the same command to start again)", soft_wrap=True)
        raise typer.Exit(130)
    _print_summary(summary, warnings=mode != "json")  # (the JSON summary holds them: nothing follows it)


def _json_warning(message: str) -> None:
    print(json.dumps({"event": "warning", "message": message}, ensure_ascii=False), file=sys.stderr, flush=True)


def _import_pipeline() -> None:
    """The pipeline's modules imported with the collector off, then kept out of every later
    collection (``gc.freeze``): Polars, Arrow, DuckDB and NumPy make objects that live as long as
    the process, and their import set off ~170 collections, 30-60 ms of a one-document run. Once
    per process; the collector is on again for the run itself."""
    if "toktok.pipeline" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        import toktok.pipeline  # noqa: F401
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _NoPandas:
    """An import hook that keeps pandas out of a ``toktok train`` process (:func:`_without_pandas`)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas":  # as if not installed: Polars' import asks for pandas' spec, and goes on
            raise ModuleNotFoundError("toktok train does not use pandas", name="pandas")


@contextmanager
def _without_pandas(cfg):
    """pandas unimportable while the run of ``cfg`` runs, unless it is loaded already or the run
    counts on Ray (whose data layer may use it).

    Arrow imports pandas, where it is installed, the first time it converts a Python list or a
    NumPy array, only to ask whether the input is a pandas object: 0.3-0.7 s of a one-document
    run. A ``toktok train`` process hands Arrow no pandas object; Arrow then takes the input as
    it is (the same arrays)."""
    if "pandas" in sys.modules or cfg.engine == "ray":
        yield
        return
    hook = _NoPandas()
    sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        sys.meta_path.remove(hook)


def _train_command() -> None:
    import inspect

    train.__signature__ = inspect.Signature(_train_parameters())
    train.__annotations__ = {p.name: p.annotation for p in train.__signature__.parameters.values()}
    app.command("train", cls=_Command)(train)


_train_command()


def _print_summary(summary, warnings: bool = True) -> None:
    """The closing summary of ``toktok train`` (and its warnings, unless the JSON summary holds them)."""
    from .printed import summary_table

    for w in summary.warnings if warnings else ():
        _say("warning", "yellow", w)
    out.print(summary_table(summary))


@app.command("convert", cls=_Command)
def convert_cmd(
    src: str = typer.Argument(..., help="A tokenizer.json (byte-level BPE) or a .tiktoken file (or a folder holding one)"),
    dst: str = typer.Argument(..., help="tokenizer.json -> a .tiktoken path (or folder); .tiktoken -> a folder for the Hugging Face files"),
    special_tokens: Optional[str] = typer.Option(None, "--special-tokens", help="The .tiktoken's special tokens: a special_tokens.txt (one a line, ids after the last rank) or a NAME.special_tokens.json (default: found beside it)"),
    pattern: Optional[str] = typer.Option(None, "--pattern", metavar="NAME|REGEX", help="The pre-tokenizer of a .tiktoken that records none beside it (default cl100k; see toktok train --pattern)"),
    force: bool = typer.Option(False, "--force", help="Replace destination files that exist"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Convert a tokenizer.json to a .tiktoken (+ special tokens list) or back, keeping every id."""
    try:
        from .warmstart import convert

        with _warnings():
            written = convert(src, dst, special_tokens=special_tokens, force=force, pattern=pattern)
    except ToktokError as e:
        _fail(e, debug)
        return
    for p in written:
        out.print(literal(f"toktok: wrote {p}"))


@app.command("verify", cls=_Command)
def verify_cmd(
    folder: str = typer.Argument(..., help="A toktok output folder (or its .tiktoken, with tokenizer.json beside it)"),
    sources: List[str] = typer.Argument(None, help="Text to check on (default: a built-in multilingual set)"),
    text_column: str = typer.Option("text", "--text-column"),
    special_tokens: Optional[str] = typer.Option(None, "--special-tokens", help="The .tiktoken's special tokens: a special_tokens.txt or NAME.special_tokens.json (default: found beside it)"),
    slices: int = typer.Option(200, "--slices", help="Random slices of the sources to check too"),
    seed: int = typer.Option(0, "--seed"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Check that tiktoken and HF tokenizers give identical ids and round-trip decodes."""
    try:
        from .count.read import read_corpus
        from .verify import verify

        texts = None
        if sources:
            texts = []
            corpus = read_corpus(list(sources), text_column=text_column)
            for batch in corpus.batches():
                texts.extend(batch.texts.to_pylist())
        rep = verify(folder, texts, slices=slices if texts else 0, seed=seed, special_tokens=special_tokens)
    except ToktokError as e:
        _fail(e, debug)
        return
    for w in corpus.warnings if sources else []:
        _say("warning", "yellow", w)
    out.print(f"toktok: parity ok: {rep.strings:,} strings, {rep.tokens:,} tokens, tiktoken == HF tokenizers")
    if rep.cut:
        from .verify import PART

        out.print(f"toktok: {rep.cut:,} text{'s' if rep.cut != 1 else ''} longer than {PART:,} characters compared "
                  f"in parts of at most {PART:,} (cut after a line end or a space), not whole")


def _list_ready(value: bool) -> None:
    """``toktok sql --list``: each ready query's name, what it shows and where it is read from."""
    if not value:
        return
    from pathlib import Path

    from .insight.runfile import READY_DIR, ready_about, ready_queries

    queries = ready_queries()
    width = max(map(len, queries), default=0)
    for name, path in queries.items():
        where = "" if path.parent.resolve() == READY_DIR.resolve() else f"  [{Path(path)}]"
        out.print(literal(f"{name:<{width}}  {ready_about(path)}{where}"), soft_wrap=True)
    raise typer.Exit()


@app.command("sql", cls=_Command)
def sql_cmd(
    run: str = typer.Argument(..., help="A toktok output folder or its run.duckdb"),
    query: str = typer.Argument(..., help="SQL, a .sql file, a ready query's name (toktok sql --list) or a table/view name"),
    csv: bool = typer.Option(False, "--csv", help="Print CSV (all rows) instead of a table"),
    parquet: Optional[str] = typer.Option(None, "--parquet", help="Write the result (all rows) to this Parquet file"),
    force: bool = typer.Option(False, "--force", help="Replace the --parquet file if it exists"),
    limit: int = typer.Option(40, "--limit", help="Rows shown in the terminal table"),
    list_ready: bool = typer.Option(False, "--list", is_eager=True, callback=_list_ready,
                                    help="List the ready queries (name and what it shows), then exit"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Run SQL on a run file (read-only) and print the result; tables and views: docs/runfile.md."""
    try:
        from .insight.report import arrow_table, head_of, write_csv, write_parquet
        from .insight.runfile import query_batches

        if parquet:
            _not_a_run_file(run, parquet, force)
        with query_batches(run, query) as batches:  # streamed: a result larger than memory is written
            if parquet:
                rows = write_parquet(batches, parquet)
                err.print(literal(f"toktok: wrote {rows:,} rows to {parquet}"))
            elif csv:
                write_csv(batches, sys.stdout)
            else:
                table, rows = head_of(batches, limit)
                out.print(arrow_table(table, limit=limit, rows=rows))
    except ToktokError as e:
        _fail(e, debug)


def _not_a_run_file(run: str, target: str, force: bool) -> None:
    """``--parquet FILE`` may not overwrite the run file or another file of the run's folder, nor
    any existing file without ``--force`` (as ``toktok convert``)."""
    import os
    from pathlib import Path

    from .errors import OutputError
    from .insight.runfile import run_path

    rp = run_path(run).resolve()
    t = Path(target).expanduser().resolve()
    if t == rp or (t.parent == rp.parent and t.exists()):
        raise OutputError(f"--parquet {target}: would overwrite a file of the run in {rp.parent}; pass a path "
                          "outside the run's folder (or a new file name)")
    if os.path.lexists(t) and not t.is_file():
        raise OutputError(f"--parquet {target}: exists and is not a file; pass a new file name")
    if os.path.lexists(t) and not force:
        raise OutputError(f"--parquet {target}: exists; pass --force to replace it (or a new file name)")


def _help(name: str) -> str:
    """The help of option ``name`` (:data:`toktok.options.OPTIONS`), for commands other than train
    (as written: Rich markup escaped)."""
    from .options import OPTION

    return _escape(OPTION[name].help)


@app.command("eval", cls=_Command, context_settings={"ignore_unknown_options": True})
def eval_cmd(
    items: List[str] = typer.Argument(..., metavar="TOKENIZER... --data SOURCE...",
                                      help="Tokenizers (toktok output folders, .tiktoken files, tokenizer.json files), then --data and Parquet/JSONL/text files, folders or globs"),
    by: Optional[str] = typer.Option(None, "--by", help="Also compare per value of this column (e.g. lang, source); 'file' = per data file"),
    text_column: str = typer.Option("text", "--text-column", help="Parquet column / JSONL field with the text"),
    bad_utf8: str = typer.Option("error", "--bad-utf8", help=_help("bad_utf8")),
    pattern: Optional[str] = typer.Option(None, "--pattern", metavar="NAME|REGEX", help="The pre-tokenizer of .tiktoken files that record none beside them (default cl100k)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (for machines) instead of a table"),
    ladder: bool = typer.Option(False, "--ladder", help="Each tokenizer is a run trained with --ladder: compare its sizes"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Compare tokenizers on text: bytes per token, tokens per word, vocabulary utilization."""
    try:
        import json

        from .errors import ConfigError
        from .insight.evaluate import WORD_UNIT, evaluate
        from .insight.report import eval_table
        from .options import OPTION

        toks, data, target = [], [], None
        for it in items:
            if it in ("--data", "-d"):
                target = data
            elif it.startswith("--data="):
                target = data
                data.append(it.split("=", 1)[1])
            elif it == "--ladder":
                ladder = True
            elif it.startswith("-") and len(it) > 1:
                raise ConfigError(f"{it}: no such option of toktok eval (see toktok eval --help; write a path starting with - as ./-NAME)")
            else:
                (toks if target is None else data).append(it)
        if not data:
            raise ConfigError("no data given; put --data and the files to evaluate on after the tokenizers")
        with _warnings() as said:
            rows = evaluate(toks, data, by=by, text_column=text_column,
                            bad_utf8=OPTION["bad_utf8"].from_text(bad_utf8, "--bad-utf8"), pattern=pattern,
                            ladder=ladder)
        if as_json:
            print(json.dumps({"words": WORD_UNIT, "by": by, "data": data, "tokenizers": toks, "rows": rows,
                              "warnings": said}, indent=1, ensure_ascii=False))
        else:
            out.print(eval_table(rows, WORD_UNIT))
    except ToktokError as e:
        _fail(e, debug)


@app.command("show", cls=_Command)
def show_cmd(
    run: str = typer.Argument(..., help="A toktok output folder or its run.duckdb"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the summary"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """One-screen summary of a run: config, inputs, sample, phases, vocab, parity, timings."""
    try:
        import json

        from .insight.runfile import describe
        from .insight.report import run_summary

        d = describe(run)
        if as_json:
            print(json.dumps(d, indent=1, ensure_ascii=False, default=str))
        else:
            out.print(run_summary(d))
    except ToktokError as e:
        _fail(e, debug)


@app.command("report", cls=_Command)
def report_cmd(
    runs: List[str] = typer.Argument(..., metavar="RUN...", help="toktok output folders (or their run.duckdb); several are compared side by side"),
    out_file: str = typer.Option("report.html", "--out", "-o", metavar="FILE", help="The HTML file to write (one file, readable offline)"),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out that is not a toktok report"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Write one self-contained HTML page about runs: summary, curves, token lengths, a vocabulary browser."""
    try:
        from .insight.html import report

        path = report(runs, out_file, force=force)
        err.print(literal(f"toktok: wrote {path} ({path.stat().st_size / 1e6:,.1f} MB; open it in a browser)"), soft_wrap=True)
    except ToktokError as e:
        _fail(e, debug)


@app.command("cut", cls=_Command)
def cut_cmd(
    run: str = typer.Argument(..., help="A finished toktok run: its output folder or run.duckdb"),
    vocab_size: str = typer.Option(..., "--vocab-size", help="Total ids of the tokenizer to cut (as train's --vocab-size)"),
    out_dir: str = typer.Option(..., "--out", "-o", help="Folder for the tokenizer files"),
    force: bool = typer.Option(False, "--force", help="Replace an --out that holds a tokenizer"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """A smaller tokenizer from a finished run, without reading the corpus again: the files a run with --vocab-size N writes."""
    try:
        from .formats.ladder import cut
        from .options import OPTION

        r = cut(run, vocab_size=OPTION["vocab_size"].from_text(vocab_size, "--vocab-size"), out=out_dir, force=force)
    except ToktokError as e:
        _fail(e, debug)
        return
    out.print(literal(f"toktok: wrote {r.out}: {r.vocab_size:,} ids, {r.merges:,} merges of the last phase"
                      + (f", {r.reserved:,} reserved special tokens" if r.reserved else "")
                      + f"; parity ok on {r.parity_strings:,} strings"))


@app.command("count", cls=_Command)
def count_cmd(
    sources: List[str] = typer.Argument(..., help="Files, folders, globs or URLs, as toktok train reads them"),
    out_file: str = typer.Option(..., "--out", "-o", help="The Parquet file of (word, count) to write"),
    pattern: Optional[str] = typer.Option(None, "--pattern", metavar="NAME|REGEX", help=_help("pattern")),
    special_tokens: List[str] = typer.Option([], "--special-token", "-s", help="Special token cut out of the text, repeatable"),
    budget: Optional[str] = typer.Option(None, "--budget", help=_help("budget")),
    working_set_mb: Optional[str] = typer.Option(None, "--working-set-mb", help=_help("working_set_mb")),
    seed: Optional[str] = typer.Option(None, "--seed", help=_help("seed")),
    engine: Optional[str] = typer.Option(None, "--engine", help=_help("engine")),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=_help("ray_address")),
    threads: Optional[str] = typer.Option(None, "--threads", help=_help("threads")),
    text_column: Optional[str] = typer.Option(None, "--text-column", help=_help("text_column")),
    bad_utf8: Optional[str] = typer.Option(None, "--bad-utf8", help=_help("bad_utf8")),
    warm_start: Optional[str] = typer.Option(None, "--warm-start", help="A base whose pattern and special tokens the count uses"),
    progress: Optional[str] = typer.Option(None, "--progress", help=_help("progress")),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out file"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress (unless --progress is given)"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Count a corpus's words as toktok train would and write the word table (Parquet) for train --word-counts."""
    reporting = False
    try:
        from .counts import count
        from .options import OPTION

        given = dict(pattern=pattern, budget=budget, working_set_mb=working_set_mb, seed=seed, engine=engine,
                     ray_address=ray_address, threads=threads, text_column=text_column, bad_utf8=bad_utf8,
                     warm_start=warm_start)
        options = {k: OPTION[k].from_text(v, OPTION[k].flag) for k, v in given.items() if v is not None}
        options.update({"special_tokens": list(special_tokens)} if special_tokens else {})
        mode = OPTION["progress"].check(progress, "--progress") if progress else "none" if quiet else "rich" if err.is_terminal else "plain"  # (train's)
        reporting = True  # from here on the reporter ends the JSON stream, error included
        with _warnings():
            r = count(list(sources), out=out_file, force=force, progress=mode, console=err.real, **options)
    except ToktokError as e:
        if not reporting and progress == "json":
            say_error(e)
        _fail(e, debug)
        return
    for w in r.warnings if progress != "json" else ():  # (the JSON summary holds them: nothing follows it)
        _say("warning", "yellow", w)
    from .printed import count_of as n

    out.print(literal(f"toktok: wrote {r.out}: {n(r.words, 'word')}, {n(r.total, 'piece')} counted in {n(r.docs, 'document')} ({r.text_bytes / 1e6:,.1f} MB) in {r.seconds:.1f}s"))


def main() -> None:  # pragma: no cover
    """The ``toktok`` command (the console script): Polars' and Arrow's allocators set to give
    freed memory back (:func:`toktok.alloc.polars_gives_back`, :func:`~toktok.alloc.arrow_gives_back`),
    the CLI, then the process's end without a last collection of what the command made.
    Example: ``toktok --help``."""
    from .alloc import arrow_gives_back, polars_gives_back

    polars_gives_back()  # before any command loads Polars or pyarrow: see toktok.alloc
    arrow_gives_back()
    try:
        app(prog_name="toktok")  # (under ``python -m toktok`` too: its usage lines and hints say ``toktok``)
    finally:
        # Python's exit collects every object still alive (Numba's typing tables, the modules'),
        # 0.1-0.3 s of a run for memory the process gives back anyway; frozen, they are skipped.
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
