"""Options dataclasses that produce their own absl flags.

Every job of the project (data prep, pretraining, each fine-tuning task,
export) has one dataclass holding its options. Its fields are the flags:
the field name is the flag name (the official one where the official scripts
had it), the default is the flag default, and `option(...)` carries the help
text and, where needed, the allowed values. A program defines the flags only
when it runs (`run`), so library modules never touch the global flag
registry and any number of programs can be imported into one process.

This module sits at the bottom of the import order (it needs only absl), so
data prep's programs use it as well as the training and export ones.

    @dataclasses.dataclass
    class Options:
        input_file: str = option(None, "Text files.", required=True)
        dupe_factor: int = option(40, "Copies of the data.")

    def main(options):             # a library function
        ...

    if __name__ == "__main__":
        options_lib.run_program(Options, main)
"""

import dataclasses
import logging as std_logging
import math
import sys
import traceback
import typing

from absl import app
from absl import flags
from absl import logging
from absl.flags import _argument_parser
from absl.flags import _flag

from foundation import tf_startup


def option(default, help, *, choices=None, required=False, minimum=None,
           above=None, maximum=None):
    """A dataclass field that is also a flag.

    Args:
        default: the default value (None for "unset").
        help: the flag's help text.
        choices: allowed values (an enum flag).
        required: the program refuses to run without it.
        minimum: the smallest allowed value (numbers).
        above: the value must be greater than this (numbers).
        maximum: the largest allowed value (numbers).
    A float flag with any of the three must also be finite.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": choices, "required": required,
        "minimum": minimum, "above": above, "maximum": maximum})


def check_values(options):
    """Checks every flag field of `options` against its range.

    Called before any work (by `run`, and by library entry points), so a
    bad value is one line naming the flag as the user typed it.

    Raises:
        ValueError: "--learning_rate must be a finite number > 0. Received:
            nan".
    """
    for field in dataclasses.fields(options):
        meta = field.metadata
        bounds = [(meta.get("minimum"), ">="), (meta.get("above"), ">"),
                  (meta.get("maximum"), "<=")]
        bounds = [(limit, op) for limit, op in bounds if limit is not None]
        value = getattr(options, field.name)
        if not bounds or value is None or isinstance(value, bool):
            continue
        wanted = " and ".join(f"{op} {limit}" for limit, op in bounds)
        finite = value == value and value not in (math.inf, -math.inf)
        ok = finite and all(
            (value >= limit) if op == ">=" else
            (value > limit) if op == ">" else (value <= limit)
            for limit, op in bounds)
        if not ok:
            kind = "a finite number" if isinstance(value, float) else "a number"
            raise ValueError(f"--{field.name} must be {kind} {wanted}. "
                             f"Received: {value!r}")


def check_fields(holder, names, ok, message):
    """Checks the fields of an object that `check_values` cannot see (a
    config, or options built without the flags' ranges).

    Args:
        holder: the object holding the fields.
        names: the field names, checked in this order.
        ok: `ok(value)` is true for a good value.
        message: the error, formatted with the field's `name` and `value`.

    Raises:
        ValueError: `message` for the first field whose value is not `ok`.
    """
    for name in names:
        value = getattr(holder, name)
        if not ok(value):
            raise ValueError(message.format(name=name, value=value))


def _flag_type(hint):
    """`str`, `int`, `float` or `bool` from a field's annotation."""
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _flag_type(args[0])
    if hint in (str, int, float, bool):
        return hint
    return None


def flag_fields(options_cls):
    """`(field, python type)` of each field of `options_cls` that is a flag.

    Fields made with `option(...)` are flags; others (objects a library
    caller passes, like a config or a strategy) are not.
    """
    hints = typing.get_type_hints(options_cls)
    result = []
    for field in dataclasses.fields(options_cls):
        if "help" not in field.metadata:
            continue
        kind = _flag_type(hints[field.name])
        if kind is None:
            raise TypeError(f"{options_cls.__name__}.{field.name}: a flag must "
                            f"be str, int, float or bool. Received: "
                            f"{hints[field.name]!r}")
        result.append((field, kind))
    return result


class _BoolOrAutoParser(_argument_parser.BooleanParser):
    """A boolean flag that also takes "auto" (None)."""

    def parse(self, argument):
        if isinstance(argument, str) and argument.strip().lower() == "auto":
            return None
        try:
            return super().parse(argument)
        except ValueError:
            raise ValueError("expected true, false or auto. Received: "
                             f"{argument!r}") from None

    def flag_type(self):
        return "bool or auto"


def _define_bool_or_auto(name, help, flag_values, module_name):
    """`--name`, `--noname` and `--name=auto` (the default: None)."""
    flag = _flag.BooleanFlag(name, None, help + " (default: auto)")
    flag.parser = _BoolOrAutoParser()
    flags.DEFINE_flag(flag, flag_values=flag_values, module_name=module_name)


def define_flags(options_cls, flag_values=flags.FLAGS, module_name=None):
    """Defines one absl flag per flag field of `options_cls`.

    Args:
        options_cls: the options dataclass.
        flag_values: where to define them (tests pass their own).
        module_name: the module the flags belong to (what `--help` lists);
            default: the program being run.
    """
    module_name = module_name or sys.argv[0]
    definers = {str: flags.DEFINE_string, int: flags.DEFINE_integer,
                float: flags.DEFINE_float, bool: flags.DEFINE_bool}
    for field, kind in flag_fields(options_cls):
        meta = field.metadata
        if kind is bool and field.default is None:
            _define_bool_or_auto(field.name, meta["help"], flag_values,
                                 module_name)
        elif meta["choices"]:
            flags.DEFINE_enum(field.name, field.default, list(meta["choices"]),
                              meta["help"], flag_values=flag_values,
                              module_name=module_name)
        else:
            definers[kind](field.name, field.default, meta["help"],
                           flag_values=flag_values, module_name=module_name)
        if meta["required"]:
            flags.mark_flag_as_required(field.name, flag_values=flag_values)


def from_flags(options_cls, flag_values=flags.FLAGS, **extra):
    """An `options_cls` with every flag field read from `flag_values`.

    Args:
        options_cls: the dataclass.
        flag_values: parsed flags (those `define_flags` defined).
        **extra: values of the non-flag fields.
    """
    values = {field.name: flag_values[field.name].value
              for field, _ in flag_fields(options_cls)}
    return options_cls(**values, **extra)


def check_no_arguments(argv):
    """Raises `app.UsageError` on positional arguments."""
    if len(argv) > 1:
        raise app.UsageError("Unexpected arguments: %s" % " ".join(argv[1:]))


# Errors that mean "bad option or input": reported as one line.
USER_ERRORS = (ValueError, OSError)


def program_name(argv=None):
    """The program's name for its error lines: `create_pretraining_data`
    for `python -m data_prep.create_pretraining_data`, `quickstart` for
    `python -m albert_apps.quickstart` (whose file is `__main__.py`)."""
    name = (argv or sys.argv)[0].rsplit("/", 1)[-1].removesuffix(".py")
    if name == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:
            name = spec.name.removesuffix(".__main__").rsplit(".", 1)[-1]
    return name


def _flags_parser(program, known_only):
    """absl's flag parsing with one error line naming the flag (a mistyped
    name, a value of the wrong type) instead of absl's two."""

    def parse(argv):
        try:
            return flags.FLAGS(argv, known_only=known_only)
        except flags.Error as error:
            sys.exit(f"{program}: error: {error} (--helpshort lists the "
                     "flags)")

    return parse


def run_program(options_cls, main_fn, argv=None, errors=USER_ERRORS, doc=None,
                pass_through=None, tensorflow=True):
    """Defines the flags of `options_cls`, parses the command line and calls
    `main_fn(options)`.

    An exception of the `errors` types from `main_fn` (a bad option or
    input, detected by the library) ends the program with one line naming
    the problem, prefixed by the program's name, and exit status 1 (the
    traceback is logged with `--verbosity=1`). `doc` (the program module's
    docstring) is what `--help` prints above the flags.

    `pass_through` names a flag (such as `runner`): when it is set, the
    arguments that are not the program's flags (another library's options,
    such as Beam's pipeline options) are passed on, `main_fn(options, rest)`,
    for that library to check; when it is not, they are refused as usual.

    `tensorflow=False` is for a program that does its work without
    TensorFlow (the data programs): it is then not imported at start-up,
    which takes seconds of CPU.
    """
    if doc:
        sys.modules["__main__"].__doc__ = doc
    define_flags(options_cls)
    program = program_name(argv)

    def main(args):
        options = from_flags(options_cls)
        passed_on = pass_through and getattr(options, pass_through)
        if pass_through and len(args) > 1 and not passed_on:
            raise app.UsageError(
                "Unexpected arguments: %s (other libraries' options need "
                "--%s)" % (" ".join(args[1:]), pass_through))
        if not pass_through:
            check_no_arguments(args)
        try:
            check_values(options)  # Before TensorFlow loads: one line.
        except ValueError as e:
            sys.exit(f"{program}: error: {e}")
        if tensorflow:
            tf_startup.import_tensorflow()  # Quietly, where there is no GPU.
        try:
            if passed_on:
                main_fn(options, args[1:])
            else:
                main_fn(options)  # Its result is for library callers.
        except errors as e:
            logging.debug("%s", traceback.format_exc())  # --verbosity=1
            # The one line is the last word: what the failed work leaves
            # behind (a half-done restore's warnings on exit) stays quiet.
            std_logging.getLogger("tensorflow").setLevel(std_logging.CRITICAL)
            sys.exit(f"{program}: error: {e}")
        except KeyboardInterrupt as stop:
            # Ctrl-C: what was being written is removed on the way out
            # (temporary files, never a result), and the lock goes with the
            # process; one line, not a traceback. A training run stopped by
            # a signal says where it stopped and exits as that signal does.
            std_logging.getLogger("tensorflow").setLevel(std_logging.CRITICAL)
            status = getattr(stop, "exit_status", None)
            if status is not None:
                sys.stderr.write(f"{program}: {stop}\n")
                sys.exit(status)
            sys.stderr.write(f"{program}: interrupted (Ctrl-C); completed "
                             "outputs are whole, run again to finish\n")
            sys.exit(130)

    app.run(main, argv=argv,
            flags_parser=_flags_parser(program, bool(pass_through)))
