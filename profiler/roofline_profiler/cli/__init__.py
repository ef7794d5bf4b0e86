"""The command line and its rendering: the commands, their flags, the files they write, the reports
and the plots.

May import every other layer.
"""
