"""The built documentation site is complete: it builds strictly, shows every public name, navigates.

* ``mkdocs build --strict`` (the same as ``hatch run docs:build``): a broken link,
  a missing API reference or a docstring warning fails the test. The site is
  built once per test run, also when pytest-xdist spreads these tests over
  several workers (the first worker builds, the others wait for its result).
* The API reference lists every public name: the built inventory
  (``site/objects.inv``) is checked against the ``__all__`` of every module the
  reference covers, read at test time, so a name added to an ``__all__`` and not
  to a page in ``docs/api/`` fails here, by name.
* Every documented function, method and class has an ``Args:`` section that
  names each of its parameters (read with griffe, the docstring reader of the
  site).
* ``docs/index.md`` links every page of the site's navigation.

The code blocks of the pages are run by ``test_docs.py``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The modules the API reference (docs/api/*.md) covers: every name in their
# ``__all__`` must be on the site. ``__version__`` and other ``_`` names are left
# out (the reference filters them, mkdocs.yml ``filters``).
API_MODULES = (
    "state_core",
    "state_core.filter",
    "state_core.environ",
    "state_core.units",
    "state_core.graph",
    "state_core.engine",
    "state_random",
    "state_transform",
    "state_transform.engine",
    "state_nn",
    "state_nn.checkpoint",
)
PACKAGES = ("state_core", "state_random", "state_transform", "state_nn")


def mkdocs_config() -> dict[str, Any]:
    """``mkdocs.yml`` as data (tags such as mkdocs' ``!ENV`` read as None)."""
    yaml = pytest.importorskip("yaml", reason="the docs dependencies are in the default hatch environment")

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    return config


# --------------------------------------------------------------------- the build


def _build(site: Path) -> dict[str, Any]:
    """Run the strict build; its outcome as JSON-able data (other workers read it from disk)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return {"returncode": None, "stdout": "", "stderr": "mkdocs build did not finish within 600 s"}
    return {"returncode": proc.returncode, "stdout": proc.stdout[-3000:], "stderr": proc.stderr[-6000:]}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the site, built once for the whole run; fails the test if the build failed."""
    pytest.importorskip("mkdocs", reason="the docs dependencies are in the default hatch environment")
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    # Under xdist every worker has its own base temp directory; their parent is
    # shared by the run, and the run id keeps runs apart.
    root = tmp_path_factory.getbasetemp()
    where = root.parent / f"docs-site-{run_id}" if run_id else root / "docs-site"
    result = where / "result.json"
    try:
        where.mkdir(parents=True)  # atomic: exactly one worker gets to build
    except FileExistsError:
        deadline = time.monotonic() + 900
        while not result.exists():
            if time.monotonic() > deadline:
                pytest.fail(f"gave up waiting for another worker's docs build in {where}")
            time.sleep(1)
    else:
        outcome = _build(where / "site")
        partial = where / "result.json.partial"
        partial.write_text(json.dumps(outcome))
        partial.replace(result)  # readers never see a half-written file
    outcome = json.loads(result.read_text())
    assert outcome["returncode"] == 0, f"mkdocs build --strict failed:\n{outcome['stdout']}\n{outcome['stderr']}"
    return where / "site"


def test_site_builds_strictly(built_site):
    for page in ("index.html", "getting-started.html", "guides/vmap2.html", "api/state-transform.html"):
        assert (built_site / page).is_file(), f"{page} was not built"
    api = (built_site / "api" / "state-transform.html").read_text()
    assert "vmap2" in api and "shard_map" in api


def test_pages_link_to_files_so_the_site_works_from_disk(built_site):
    # use_directory_urls: false -- a link to a directory ("guides/vmap2/") opens a
    # file listing, not the page, when site/index.html is opened without a server.
    index = (built_site / "index.html").read_text()
    hrefs = re.findall(r'href="([^"#:]+)"', index)
    assert "getting-started.html" in hrefs
    directory_links = [h for h in hrefs if h.endswith("/") and h not in ("./", ".")]
    assert not directory_links, f"site/index.html links to directories: {directory_links}"


# ------------------------------------------------------------------ the inventory


def read_inventory(path: Path) -> set[str]:
    """The object names of a Sphinx inventory (version 2): four header lines, then zlib text."""
    data = path.read_bytes()
    header, body = data.split(b"\n", 4)[:4], data.split(b"\n", 4)[4]
    assert header[0] == b"# Sphinx inventory version 2", f"{path} is not a version 2 inventory: {header[0]!r}"
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines() if line.strip()}


def test_read_inventory(tmp_path):
    body = zlib.compress(b"pkg.f py:function 1 api/pkg.html#$ -\npkg py:module 1 api/pkg.html#$ -\n")
    path = tmp_path / "objects.inv"
    path.write_bytes(b"# Sphinx inventory version 2\n# Project: x\n# Version: 0\n# zlib follows\n" + body)
    assert read_inventory(path) == {"pkg.f", "pkg"}


def _public_names() -> Iterator[tuple[str, Any]]:
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if not name.startswith("_"):
                yield f"{module_name}.{name}", getattr(module, name)


def _private_bases(cls: type, public: set[int]) -> list[type]:
    """The bases whose members ``cls`` shows as its own: ours, not public themselves (mixins),
    and not already shown by a public base (``Module``'s mixins are on ``Module``'s page)."""
    ours = cls.__module__.split(".")[0]
    bases = cls.__mro__[1:]
    shown = {id(b) for public_base in bases if id(public_base) in public for b in public_base.__mro__}
    return [
        base
        for base in bases
        if base.__module__.split(".")[0] == ours and id(base) not in public and id(base) not in shown
    ]


def expected_reference_names() -> set[str]:
    """Every name the reference must show: each ``__all__`` entry, and the members of
    a public class that come from private mixins (``RandomState.normal``)."""
    names = dict(_public_names())
    public = {id(obj) for obj in names.values()}
    expected = set(names)
    for path, obj in names.items():
        if inspect.isclass(obj):
            for base in _private_bases(obj, public):
                expected |= {f"{path}.{attr}" for attr in vars(base) if not attr.startswith("_")}
    return expected


def test_every_public_name_has_a_docstring():
    # The reference leaves out a name without one (mkdocstrings' default), so the
    # inventory test below would also catch it, but later and less plainly.
    names = dict(_public_names())
    public = {id(obj) for obj in names.values()}
    missing = []
    for path, obj in names.items():
        defined_in = getattr(obj, "__module__", None) or ""
        if inspect.ismodule(obj) or defined_in.split(".")[0] not in PACKAGES:
            continue  # modules, and objects defined outside our packages (JAX's)
        if callable(obj) and type(obj).__module__ != "typing" and not (obj.__doc__ or "").strip():
            missing.append(path)
        if inspect.isclass(obj):
            for owner in (obj, *_private_bases(obj, public)):
                for attr, value in vars(owner).items():
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if attr.startswith("_") or not inspect.isfunction(fn):
                        continue
                    if not (fn.__doc__ or "").strip():
                        missing.append(f"{path}.{attr}")
    assert not missing, f"public names without a docstring (the API reference would leave them out): {missing}"


def test_the_reference_lists_every_public_name(built_site):
    missing = sorted(expected_reference_names() - read_inventory(built_site / "objects.inv"))
    assert not missing, (
        f"{len(missing)} public names are not in the API reference (add a `::: name` line to the "
        "page of docs/api/ where it belongs, and give the name a docstring):\n  " + "\n  ".join(missing)
    )


# ------------------------------------------------------------------- Args sections


def _load_api() -> Any:
    """The packages as the site reads them: griffe with mkdocs.yml's docstring style and extensions."""
    griffe = pytest.importorskip("griffe", reason="the docs dependencies are in the default hatch environment")
    config = mkdocs_config()
    handler = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    python = handler["handlers"]["python"]
    extensions = griffe.load_extensions(*(str(ROOT / e) for e in python["options"]["extensions"]))
    loader = griffe.GriffeLoader(
        search_paths=[str(ROOT / p) for p in python["paths"]],
        docstring_parser=griffe.Parser(python["options"]["docstring_style"]),
        extensions=extensions,
    )
    for package in PACKAGES:
        loader.load(package)
    loader.resolve_aliases(external=False)
    return griffe, loader.modules_collection


def _target(obj: Any) -> Any:
    return obj.final_target if obj.is_alias else obj


def _documented_parameters(griffe: Any, *objects: Any) -> set[str]:
    names: set[str] = set()
    for obj in objects:
        if obj is None or obj.docstring is None:
            continue
        for section in obj.docstring.parsed:
            if section.kind is griffe.DocstringSectionKind.parameters:
                names |= {p.name.lstrip("*") for p in section.value}
    return names


def _our_bases(cls: Any) -> list[Any]:
    """The classes ``cls`` derives from that our packages define (griffe objects, nearest first)."""
    try:
        return [base for base in cls.mro() if base.path.split(".")[0] in PACKAGES]
    except ValueError:  # a base griffe cannot resolve
        return []


def _undocumented(griffe: Any, obj: Any) -> list[str]:
    """The parameters of a function (or of a class's ``__init__``) that no ``Args:`` entry names.

    A parameter is documented once, where it is introduced: a dataclass field in
    the docstring of the class that declares it, a method's parameter in the
    docstring of the method it overrides.
    """
    if obj.is_class:
        init = obj.all_members.get("__init__")
        if init is None:
            return []
        init = _target(init)
        if init.parent is not obj and init.parent.path.split(".")[0] in PACKAGES and init.parent.docstring:
            # An inherited constructor is documented once, on the class that defines it.
            return []
        documented = _documented_parameters(griffe, obj, init, *_our_bases(obj))
        function = init
    else:
        overridden = []
        if obj.parent is not None and obj.parent.is_class:
            overridden = [base.members.get(obj.name) for base in _our_bases(obj.parent)]
        documented = _documented_parameters(griffe, obj, *(_target(m) for m in overridden if m is not None))
        function = obj
    return [p.name for p in function.parameters if p.name not in ("self", "cls") and p.name not in documented]


def undocumented_parameters() -> dict[str, list[str]]:
    """``reference name -> parameters without an Args entry`` for every documented callable."""
    griffe, collection = _load_api()
    names = dict(_public_names())
    public = {id(obj) for obj in names.values()}
    found: dict[str, list[str]] = {}

    def check(path: str, obj: Any) -> None:
        if not (obj.is_function or obj.is_class):
            return
        missing = _undocumented(griffe, obj)
        if missing:
            found[path] = missing

    for path, runtime in names.items():
        obj = _target(collection[path])
        check(path, obj)
        if obj.is_class:
            shown = {n for n in obj.members if not n.startswith("_")}
            for base in _private_bases(runtime, public):
                shown |= {n for n in vars(base) if not n.startswith("_")}
            for name in sorted(shown):
                check(f"{path}.{name}", _target(obj.all_members[name]))
    return found


def test_documented_callables_name_their_parameters():
    found = undocumented_parameters()
    assert not found, (
        f"{len(found)} documented callables have parameters that their docstring's `Args:` section "
        "does not name:\n  " + "\n  ".join(f"{name}: {', '.join(params)}" for name, params in sorted(found.items()))
    )


# ---------------------------------------------------------------- the index page


def _nav_pages(entries: Any) -> Iterator[str]:
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from _nav_pages(value) if isinstance(value, list) else [value]


def test_the_index_links_every_page_of_the_navigation():
    pages = [p for p in _nav_pages(mkdocs_config()["nav"]) if p != "index.md"]
    assert "guides/vmap2.md" in pages and "api/state-core-engine.md" in pages
    linked = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", (DOCS / "index.md").read_text())}
    missing = [p for p in pages if p not in linked]
    assert not missing, f"docs/index.md does not link these pages of the navigation (mkdocs.yml `nav`): {missing}"
