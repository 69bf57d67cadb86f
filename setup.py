"""Which import packages the distribution ships: found, not listed, so that a new subpackage
(memstore/agent/, say) is in the wheel without anyone remembering to add it.

The top-level folders the design card asks for are mapped into two import packages: the
library, with its Alembic migrations inside (so that a wheel can migrate a database), and
the CLI. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

# import package -> the folder it is built from
ROOTS = {"memstore": "memstore", "memstore.migrations": "migrations", "memctl": "cli/memctl"}


def packages() -> list[str]:
    found = []
    for package, folder in ROOTS.items():
        found.append(package)
        found.extend(f"{package}.{sub}" for sub in find_packages(folder))
    return found


setup(packages=packages(), package_dir=ROOTS)
