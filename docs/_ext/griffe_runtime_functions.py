"""A griffe extension for the API reference: functions that are made, not defined.

Read from the source, a public function written as an assignment is an
attribute without a signature, and the reference would show it bare:

* ``normal = _on_default(RandomState.normal)`` (``state_random`` writes every
  sampler once, as a ``RandomState`` method, and makes the module-level function
  from it) is documented with the method's parameters minus the first
  (``self``), the method's return annotation and the docstring the function
  carries at run time (what ``help()`` shows);
* ``remat = checkpoint`` (a second name for a function of the package) becomes
  an alias of that function;
* any other module attribute whose run-time value is a function (a factory's
  result, such as ``jacrev = _jacobian_factory(...)``) is documented from the
  run-time object: its ``inspect.signature`` and its ``__doc__``.

The extension looks only at module attributes and needs no list of names: a
new function made this way is documented without registering it here.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class RuntimeFunctions(griffe.Extension):
    """Document module attributes whose run-time value is a function as functions."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for module in _modules(pkg):
            for name, member in list(module.members.items()):
                if name.startswith("_") or member.is_alias or not isinstance(member, griffe.Attribute):
                    continue
                runtime = getattr(importlib.import_module(module.path), name, None)
                if not inspect.isfunction(runtime):
                    continue
                target = _function_named_by(member.value, loader)
                if target is not None:
                    module.set_member(name, griffe.Alias(name, target.path, lineno=member.lineno, parent=module))
                    continue
                method = _method_argument(member, loader)
                if method is not None:
                    function = _from_method(member, method, runtime)
                else:
                    function = _from_runtime(member, runtime)
                if runtime.__doc__:
                    # Parsed like every other docstring (mkdocs.yml `docstring_style`).
                    function.docstring = griffe.Docstring(
                        inspect.cleandoc(runtime.__doc__),
                        parent=function,
                        parser=loader.docstring_parser,
                        parser_options=loader.docstring_options,
                    )
                module.set_member(name, function)


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for sub in module.modules.values():
        if not sub.is_alias:
            found.extend(_modules(sub))
    return found


def _resolved(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    return obj.final_target if isinstance(obj, griffe.Alias) else obj


def _lookup(path: str, loader: griffe.GriffeLoader) -> griffe.Object | None:
    try:
        return _resolved(loader.modules_collection[path])
    except KeyError:
        return None


def _function_named_by(value: Any, loader: griffe.GriffeLoader) -> griffe.Function | None:
    """The function a plain name (``remat = checkpoint``) refers to, if it is one."""
    if not isinstance(value, (griffe.ExprName, griffe.ExprAttribute)):
        return None
    target = _lookup(value.canonical_path, loader)
    return target if isinstance(target, griffe.Function) else None


def _method_argument(attr: griffe.Attribute, loader: griffe.GriffeLoader) -> griffe.Function | None:
    """The method named by the single argument of the call that makes ``attr``, if any."""
    value = attr.value
    if not isinstance(value, griffe.ExprCall) or len(value.arguments) != 1:
        return None
    argument = value.arguments[0]
    if not isinstance(argument, griffe.ExprAttribute):
        return None
    class_path, _, method_name = argument.canonical_path.rpartition(".")
    cls = _lookup(class_path, loader)
    if not isinstance(cls, griffe.Class) or method_name not in cls.all_members:
        return None
    method = _resolved(cls.all_members[method_name])
    return method if isinstance(method, griffe.Function) else None


def _function(attr: griffe.Attribute, parameters: list[griffe.Parameter], returns: Any) -> griffe.Function:
    # The parent is set at once: griffe re-targets the aliases of ``attr`` (its
    # re-exports) to the new object, which needs the object's path.
    return griffe.Function(
        attr.name,
        parent=attr.parent,
        lineno=attr.lineno,
        endlineno=attr.endlineno,
        parameters=griffe.Parameters(*parameters),
        returns=returns,
    )


def _from_method(attr: griffe.Attribute, method: griffe.Function, runtime: Any) -> griffe.Function:
    # Copies: the method keeps its own parameters. The annotations stay the method's
    # expressions, so their names resolve (and link) in the method's module.
    parameters = [
        griffe.Parameter(p.name, annotation=p.annotation, kind=p.kind, default=p.default, docstring=p.docstring)
        for p in list(method.parameters)[1:]
    ]
    expected = list(inspect.signature(runtime).parameters)
    if [p.name for p in parameters] != expected:
        raise ValueError(
            f"{attr.path}: its run-time parameters {expected} are not those of {method.path} "
            "without the first; the reference would show the wrong signature."
        )
    return _function(attr, parameters, method.returns)


def _from_runtime(attr: griffe.Attribute, runtime: Any) -> griffe.Function:
    signature = inspect.signature(runtime)
    parameters = [
        griffe.Parameter(
            p.name,
            annotation=_annotation(p.annotation),
            kind=griffe.ParameterKind(p.kind.description),
            default=None if p.default is p.empty else repr(p.default),
        )
        for p in signature.parameters.values()
    ]
    return _function(attr, parameters, _annotation(signature.return_annotation))


def _annotation(annotation: Any) -> str | None:
    if annotation is inspect.Signature.empty:
        return None
    # Modules with ``from __future__ import annotations`` keep them as source text.
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
