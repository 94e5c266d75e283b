"""jetwatch: health of NATS JetStream pull consumers.

Installed, the repository's folders are this one package: commands/ is `jetwatch` itself (the
entry points: cli, up, subcommands), and collectors/, store/, sql/, health/, pipeline/, actions/,
dashboard/, demo/ and core/ are `jetwatch.<folder>` (pyproject.toml, [tool.setuptools.package-dir]).
"""
