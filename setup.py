"""Which import packages the distribution ships: found, not listed, so that a new subpackage
(memstore/agent/, say) is in the wheel without anyone remembering to add it.

The top-level folders the design card asks for are mapped into two import packages: the
library, with its Alembic migrations inside (so that a wheel can migrate a database), and
the CLI. Everything else is in pyproject.toml.
"""

import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# import package -> the folder it is built from
ROOTS = {"memstore": "memstore", "memstore.migrations": "migrations", "memctl": "cli/memctl"}


def packages() -> list[str]:
    found = []
    for package, folder in ROOTS.items():
        found.append(package)
        found.extend(f"{package}.{sub}" for sub in find_packages(folder))
    return found


class FreshBuildPy(build_py):
    """Copies the packages into an emptied build/lib: setuptools leaves modules there that the
    source no longer has, and `pip install .` over an old checkout shipped them."""

    def run(self) -> None:
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


setup(packages=packages(), package_dir=ROOTS, cmdclass={"build_py": FreshBuildPy})
