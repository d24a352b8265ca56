"""The plugin module for MindFormers' ``run_mindformer.py --register_path DIR`` (DIR: this folder,
``training_monitor.MINDFORMERS_REGISTER_PATH``). A YAML entry's ``auto_register: training_monitor_plugin.NAME`` makes
MindFormers import this module, which registers ``TrainingMonitor``, ``ScaledLearningRate`` and
``MFTrainOneStepCellFinite``; each entry's ``type:`` then resolves."""
from training_monitor.callbacks import ScaledLearningRate, TrainingMonitor, register_mindformers
from training_monitor.callbacks.mf import MFTrainOneStepCellFinite

__all__ = ["TrainingMonitor", "ScaledLearningRate", "MFTrainOneStepCellFinite"]

register_mindformers()
