"""``monitor demo`` (a plug-in of the ``monitor`` command, declared in the ``training_monitor.commands`` entry
point group): a real MindSpore training run on CPU with the monitor attached and faults injected. The command
and the fault specifications import no MindSpore; the run itself is
:func:`training_monitor.callbacks.demo.run_demo`."""
