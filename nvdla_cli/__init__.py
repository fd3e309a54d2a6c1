"""The `nvdla` command line: the top of the dependency graph (nvdla_cli -> rtl -> mapper -> nvdla_sim).

main.py parses arguments and runs the simulator commands; map_commands.py and rtl_commands.py add the
mapper and RTL subcommands.
"""
