from picontext.cli.main import run

run()
