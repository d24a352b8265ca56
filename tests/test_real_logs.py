"""The real-log corpus (``tests/data/reallogs/``): ``monitor replay`` against what a careful reader names in
each public excerpt (``labels.yaml``; sources in ``SOURCES.md``).

The scoring is ``benchmarks/real_logs.py --json``, run once in its own process (it replays every file with
the ``monitor replay --json`` command line). Each file must be read (exit status 0, at least
``min_records`` records: step records, evaluations and lines merged into a step record), every ``must`` event of its labels found at its step, and nothing its
``must_not`` names raised. ``KNOWN_FAILING`` lists the files that assertion fails on today; they are
strict xfails, so a file that starts passing fails the run until its name is taken out of the list.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "reallogs"
LABELS = yaml.safe_load((CORPUS / "labels.yaml").read_text(encoding="utf-8"))
SPLITS = ("tune", "heldout", *(f"heldout{n}" for n in range(2, 110)))  # the batches, in the order gathered

# the team's shared samples (both tables of shared/samples/README.md), kept in tune/
SHARED_SAMPLES = frozenset({
    "mindformers_glm6b_finetune_overflow_01.log", "mindformers_llama2_13b_normal_01.log",
    "mindformers_llama31_8b_gradnorm_skip_01.log", "megatron_lm_gpt2_345m_normal_01.log",
    "megatron_ds_tr1_13b_spike_lossscale_01.log", "hf_deepspeed_trainer_normal_01.log",
    "deepspeed_zero2_overflow_storm_01.log", "deepspeed_overflow_collapse_07.log", "fairseq_min_loss_scale_10.log",
    "nanogpt_nan_14.log", "torchtitan_healthy_17.log", "olmo_loss_zero_18.log", "colossalai_found_inf_nan_24.log",
    "mindspore-msrun_healthy_29.log", "mindocr_nan_31.log", "custom_nan_33.log", "custom-minimind_healthy_36.log",
})

# the files each held-out batch had when gathered, at least (a file moved to tune/ still counts for its batch)
GATHERED = {"heldout2": 15, "heldout3": 25, "heldout4": 30, "heldout5": 30, "heldout6": 30, "heldout7": 30,
            "heldout8": 30, "heldout9": 30, "heldout10": 25, "heldout11": 25, "heldout12": 25, "heldout13": 25,
            "heldout14": 25, "heldout15": 25, "heldout16": 20, "heldout17": 20, "heldout18": 20, "heldout19": 15,
            "heldout20": 15, "heldout21": 15, "heldout22": 12, "heldout23": 20, "heldout24": 15, "heldout25": 20,
            "heldout26": 15, "heldout27": 15, "heldout28": 9, "heldout29": 6,
            "heldout30": 15, "heldout31": 12, "heldout32": 12,
            "heldout33": 10, "heldout34": 7, "heldout35": 13, "heldout36": 10, "heldout37": 11, "heldout38": 13, "heldout39": 5, "heldout40": 10, "heldout41": 4, "heldout42": 3, "heldout43": 8, "heldout44": 6, "heldout45": 5, "heldout46": 2, "heldout47": 4, "heldout48": 4, "heldout49": 8, "heldout50": 6, "heldout51": 4, "heldout52": 6, "heldout53": 5, "heldout54": 6, "heldout55": 5, "heldout56": 2, "heldout57": 10, "heldout58": 8, "heldout59": 8, "heldout60": 6, "heldout61": 6, "heldout62": 5, "heldout63": 5, "heldout64": 5, "heldout65": 5, "heldout66": 5, "heldout67": 5, "heldout68": 6, "heldout69": 7, "heldout70": 3, "heldout71": 2, "heldout72": 9, "heldout73": 5, "heldout74": 6, "heldout75": 6, "heldout76": 8, "heldout77": 7, "heldout78": 6, "heldout79": 6, "heldout80": 5, "heldout81": 9, "heldout82": 7, "heldout83": 6, "heldout84": 6, "heldout85": 6,
            "heldout86": 8, "heldout87": 9, "heldout88": 9, "heldout89": 8,
            "heldout90": 6, "heldout91": 8, "heldout92": 6, "heldout93": 8,
            "heldout94": 8, "heldout95": 7, "heldout96": 9, "heldout97": 8,
            "heldout98": 6, "heldout99": 2,
            "heldout100": 9, "heldout101": 9,
            "heldout102": 8, "heldout103": 8,
            "heldout104": 7, "heldout105": 8, "heldout106": 7, "heldout107": 5, "heldout108": 7, "heldout109": 6}

# files the full assertion fails on with the replay of this commit (not read, an event missed, or a false alarm)
KNOWN_FAILING = frozenset({
    "so_vits_svc_vits_gan_steps_0_3800_mel_loss_41p0_to_18p4_healthy_wsywsywsywsywsy979.log",
    "pytorch_dtvnet_tqdm_epochs_0_3_iters_0_1836_loss_32_to_136_spike_at_iter1384_iloveu3d.log",
    "pytorch_bert_finetune_epochs_0_2_loss_0p69_to_0p003_val_acc_0p50_to_0p94_healthy_windyalan.log",
    "pytorch_word_language_model_rnn_tanh_epochs_1_10_valid_loss_17p68_to_31p80_spike_end_of_epoch3_ohalon.log",
    "styletts_tsukasa_speech_epoch1_steps_10_50_mel_loss_1p22_to_0p74_step_gap_8s_to_117s_stall_at_step50_respaired6.log",
    "pytorch_custom_val_accuracy_epochs_2_72_acc_7p27_to_95p27_frozen_12p73_epochs_4_16_shimooo3.log",
    "pytorch_csta_adapter_finetune_epochs_0_53_loss_4p12_frozen_4p0874_epochs_30_40_acc_0p0474_frozen_kabir5296.log",
    "pytorch_unet_gan_epochs_1_50_loss_g_0p147_to_0p049_epoch_gap_12min_to_143min_stall_at_epoch38_latinaxia.log",
    "yolov5_kart_plates_epochs_360_398_box_loss_0p040_map50_0p96_early_stop_healthy_jgbaschool.log",
    "keras_alexnet_epochs_76_84_loss_0p23_to_0p50_at_epoch80_val_loss_4p69_spike_the-deep-learners15.log",
    "keras_fit_epochs_1_13_loss_0p67_to_6p05_at_epoch10_spike_piaic-official15.log",
    "mxnet_plate_ocr_epoch0_batches_50_400_accuracy_frozen_0p000000_szad670401_15.log",
    "tensorflow_bilstm_crf_ner_iterations_1_4_steps_100_4100_ner_loss_31p9_to_1p7_healthy_oye93.log",
    # promoted from heldout9/heldout10 after scoring (to be fixed)
    "mindspore_icnet_8p_epochs_1_5_per_step_719_to_1044ms.log",  # 719 -> 1044 ms/step, no data time: 40 s lost
    "mmyolo_yolox_iters_1_3_data_time_31_9s_of_33_7s_789.log",  # data_time 12-32 s, iterations 1-3: the warm-up
    # promoted from heldout14 after scoring: a name the alias table does not take for a loss (a WaveGlow fork's
    # `loss_-4.06`, a name glued to its value)
    "waveglow_steps_78540_78660_negative_loss_then_4191_at_78620_32.log",
    # from heldout7: an epoch's first loss back at the excerpt's first level (0.51 -> 5.15) after a fall from 6.00;
    # within 3x the range of the excerpt's own losses, which the short-excerpt test requires
    "ner_bilstm_epoch_restart_loss_sawtooth_24.log",
    # promoted from heldout11 after scoring: iter_time 8.7 s (8.4 s of it data) and 14.4 s, then 1.8 and 0.29 s: the
    # slow records come first, with nothing before them to be slower than
    "yolox_iters_240_270_data_time_8_4s_of_8_7s_327.log",
    # promoted from heldout17 after scoring: a loss printed to 3 decimals frozen for 7 steps (the frozen rule wants
    # 20, or 5 significant digits); lines of an epoch and its time only, read now, whose slow epoch is the first
    # record (nothing before it to be slower than); a Markdown table with a True/False `train` column
    "lightning_tqdm_epoch_0_steps_100_106_train_loss_frozen_4_600_20344.log",
    "sovits_fork_epochs_6019_6025_epoch_6019_cost_53049s_then_14s_563.log",
    "minai_fastai_style_markdown_table_epochs_0_4_train_and_valid_rows_healthy_3.log",
    # from heldout19: an inf grad norm on steps apex skipped (the overflow's, by design, no nan_inf)
    "tacotron2_apex_resume_iters_12001_12011_loss_0_17_to_4_97_grad_norm_inf_scale_32768_to_512_485.log",
    # promoted from heldout19 after scoring: timm's summary CSV rows without their header
    # (`209,nan,4.16,7.72,24.02`): no column is named, so no loss is known to turn nan
    "timm_t2t_vit14_summary_csv_epochs_200_213_train_loss_nan_at_209_26.log",
    # promoted from heldout34 and heldout35 after scoring: XLM's `-    2600 -   43.00 sent/s - .. - MLM-en:  1.9930`
    # lines (a bare count, a loss named for its objective alone); grad norms of 4230 and 8102 on a run's first
    # records (nothing to compare with, under the absolute `level`)
    "xlm_mlm_enro_steps_2600_2800_sent_per_s_healthy_xlm231.log",
    "ms_swift_gkd_grad_norm_4230_loss_429_step_5_vllm_prefix_cache_6600.log",
    "ms_swift_gkd_grad_norm_8102_to_11757_loss_810_to_1323_steps_10_11_6600.log",
    # promoted from heldout37 after scoring: ROMP's `Time 2.87 RUN 0.87 ..` rising to 5.96 s over 6 records (the
    # first is the only baseline); a DPO loss at 0.1726-0.1733 for 6450 steps, its last digits moving (not frozen)
    "romp_epoch0_iters_100_350_time_2_87_to_5_96_run_0_9_romp170.log",
    "minimind_dpo_loss_frozen_0_1733_lr_1e-8_moonlight.log",
    # promoted from heldout20 after scoring: StyleGAN2's `tick` lines, no step or loss named; a loss hovering at
    # 3.32 (ln 28, chance over the characters) with CER and WER at 1.000, no value repeated; one loss part exactly
    # 0.0000 with the total 0.0004 then 0.0003, two records; MXNet's Speedometer rate alone, no step time (the time
    # lost is unknown)
    "stylegan2_tf_colab_ticks_0_3_kimg_18_650s_per_tick_then_ctrl_c_healthy_skyflynil2.log",
    "deep_avsr_vo_pretrain_steps_0_7_loss_2_91_then_stuck_3_32_cer_wer_1_000_43.log",
    "mmseg_deeplabv3plus_custom_iters_50_150_loss_0_135_then_decode_loss_0_0000_from_100_185.log",
    "mxnet_ssd_custom_epochs_0_61_speed_95_to_46_then_23_samples_s_at_epoch61_75.log",
    # promoted from heldout21 after scoring: one iteration of 207 s among 72 s ones, compute only (under
    # min_seconds); a second grad-norm burst judged against a window that holds the first; `Step at 4 with
    # Perplexity: nan` (a step named with `at`)
    "megatron_deepspeed_qwen_dual8_eth_iters_1_20_iter_14_208s_vs_72s_lockclock.log",
    "megatron_deepspeed_tp1pp4dp4_iters_10_40_grad_norm_1_9_to_31_6_at_19_and_51_5_at_31_lockclock.log",
    "deepspeed_random_ltd_gpt2_finetune_steps_1_5_perplexity_61_6_then_nan_from_4_dsexamples.log",
    # promoted from heldout22 after scoring: two loss rises under the short-excerpt test's bounds (0.39 above a
    # flat 0.70, under excursion_min; 1.28x after two records, under excursion_ratio)
    "cpm2_finetune_iters_1360_1450_lm_loss_0_70_to_1_086_at_1420_back_0_70_cpm2ft11.log",
    "fairseq_fastcorrect2_pretrain_updates_1800_2000_overflow_scale_64_to_32_loss_8_2_to_10_5_gnorm_1_5_to_6_1_neuralspeech45.log",
    # promoted from heldout23 after scoring: apex's `reducing loss scale to 1.0`, the first scale shown, at the
    # floor and not below it
    "timm_efficientdet_coco_scratch_iters_1200_1600_loss_1430_to_380_apex_overflow_scale_1_0_edp13.log",
    # promoted from heldout25 after scoring: a noisy loss, 3.42 then 6.29 against that one earlier value, over the
    # short-excerpt test's bounds (1.84x and 2.87 above it; BigScience's real 6.4 -> 11.4 against one value is 1.78x),
    # and a slowdown shown only by the line times around a validation; DL4J's `Score at iteration 0 is 2.52`
    # (`score` is a metric in most logs); Marian's validation lines (`[valid] .. ce-mean-words : 1.5692`: no eval
    # or loss name); `generator total=8.44e+04` on the line after its epoch's; `Train_rf 4.856e-01`, no loss name
    "at_bsn_denoise_epochs_16_17_iters_3800_4200_60s_per_100_iters_then_1650s_after_validation_atbsn1.log",
    "dl4j_lenet_mnist_batch_size_1_iterations_0_7_score_2_05_2_81_startup_lines_healthy_dl4j3443.log",
    "marian_transformer_zhen_updates_575000_580000_cost_2_77_28500_words_s_valid_stalled_18_times_healthy_md480.log",
    "neural_enhance_2x_upscaling_epochs_1_8_generator_total_8_4e4_to_3_0e4_208s_per_epoch_healthy_ne63.log",
    "teach_motion_epochs_57_69_train_rf_frozen_4_856e-01_every_epoch_teach27.log",
    # promoted from heldout26 after scoring: a TSV table whose count column is `steps` (a record's step count in
    # the alias table, and in prose a run's setting: `Gradient Accumulation steps = 4`)
    "chainerrl_ppo_pendulum_tsv_steps_10000_60000_mean_reward_minus_1577_to_minus_1434_46s_per_10k_steps_healthy_crl126.log",
    # promoted from heldout27 after scoring: a step time 2.4x slower for 1200 steps of a run sharing its host, 170 s
    # of compute only (under min_seconds, by design); a second grad-norm burst (171 after 2.2) judged against a
    # range that holds the first (0.38 to 98)
    "modded_nanogpt_contended_steps_3800_8510_ms_per_step_57_to_140_from_7400_pg2.log",
    "modded_nanogpt_recurrent_steps_0_170_grad_norm_0_4_to_70_at_3_171_at_20_loss_28_9_pg1230.log",
    # promoted from heldout23 after scoring: an RL trainer's environment `steps_per_s` fall, the episodes numbered
    # on lines of their own (`::step episode=1430`) and no step time printed
    "dotaclient_ppo_episodes_1427_1432_steps_per_s_805_to_141_episode_gap_5s_to_67s_dota15.log",
    # promoted from heldout28 after scoring: epochs 1.75 s, then 2.4-2.8 s from the fourth on, compute only, about
    # 13 s lost (under min_seconds, by design)
    "tensorflow_logreg_epochs_1_18_epoch_time_1_75_to_2_77s_slowdown_198.log",
    # promoted from heldout30 after scoring: train_time 1.07 -> 1.45 s a step for 140 steps on an Ascend TF port,
    # compute only (load_time 0.000), about 53 s lost (under min_seconds, by design)
    "tf1_npu_lip2wav_steps_3680_3869_train_time_1_07_to_1_47s_from_3730_loss_spike_16_5_to_24_at_3812_lip2wav.log",
    # promoted from heldout38 after scoring: a table of unnamed values (no loss to read); a loss of 0.047 doubling
    # on an 8-record excerpt (under the short-excerpt test's absolute margin); KittiSeg's step time up 88x after its
    # step-0 record, the only faster one (in the warm-up, no reference)
    "epe_ienet2_steps_1_5_column_table_nan_from_step_4_66.log",
    "keras_old_epochs_60_67_loss_0_047_flat_then_0_061_0_096_jump_deepj49.log",
    # promoted from heldout43 after scoring: a GRPO loop's per-sample `[timing] sample processed in 278.92s` lines
    # (126 s -> 1912 s), numbered by no step and outside its 9 step records, which carry no step time
    "custom_grpo_mps_lora_gsm8k_sample_time_126s_to_1380s_1912s_swap_sampling_watchdog_junyij.log",
    # promoted from heldout43 after scoring: verl's `actor/pg_loss:0.0` on 20 of 21 steps with rewards at 0 (a
    # collapsed policy); the degenerate rule judges the record's loss, which moves
    "verl_grpo_qwen2_5_1_5b_steps_1_21_pg_loss_0_score_0_entropy_0_46_to_11_6_then_actor_unavailable_foo1szz.log",
    # promoted from heldout45 after scoring: MindCV's epoch loss 6.93 at 213 among last-batch losses of 2.2-5.6
    # (1.7x their median, 3.9 robust sigma); the validation top-1 falling 69.5% -> 2.1% says the divergence, the
    # training loss alone does not
    "mindcv_gmlp_s16_ascend_modelarts_epochs_1_214_diverges_at_213_loss_6_93_top1_69_to_2pct_ms2024code3.log",
    # promoted from heldout51 after scoring: one loss part (CTCLoss) exactly 0 on every record beside a falling
    # total (SARLoss); the degenerate rule judges the line's loss
    "paddleocr_ppocrv3_rec_global_steps_90_110_ctcloss_0_every_record_acc_0_degenerate_7769.log",
    # promoted from heldout52 after scoring: progress lines every 25 steps, each a record of one step (a record
    # stands for the steps since the last only when the line says so: Megatron's interval fields), so the time
    # the slow stretch lost is counted 25 times too short for min_seconds
    "custom_gpt2_lora_mps_steps_2900_4025_elapsed_11573s_to_27452s_throughput_drop_3000_3500_gness1804.log",
    # promoted from heldout54 after scoring: one iteration line whose grad norm, 224119, is judged against nothing
    # (under the absolute level, 1e6 on 3 records: a 671B model's norm is about sqrt(N) x a component)
    "megatron_bridge_deepseek_v3_iteration_10_grad_norm_224119_mbridge2403.log",
    # promoted from heldout58 after scoring: samples/s 3150 -> 2000 after an evaluation, a record every 50 steps
    # (21 records before the drop, under the 100 records the drop test wants; 1.6x slower is no excursion)
    "arcface_torch_r100_fp16_steps_25000_26950_3100_to_2000_samples_s_after_eval_arcfacelog.log",
    # promoted from heldout58 after scoring: four DeepSpeed overflows at steps 16-19 (65536 -> 4096), within the 24
    # start-up steps whose overflows may be calibration
    "deepspeed_llamafactory_baichuan13b_finetune_steps_16_19_overflow_every_step_scale_65536_to_4096_lf918.log",
    # promoted from heldout64 after scoring: a grad norm of 35.9 after 6.0 and 5.8, 47.0 three records before: under
    # the tenfold excursion the few-records test asks of a grad norm
    "megatron_lm_gpt3_7b_fp16_8gpu_iters_10_100_overflow_scale_262144_to_131072_grad_norm_35_9_at_50_fixstars_mdk.log",
    # promoted from heldout65 after scoring: llama.cpp's `iter= 0 .. loss=0.000000`, printed before any loss is
    # computed, is a zero loss (which fires at once: a run whose loss is 0 from its first step is caught there)
    "llamacpp_finetune_llama3_8b_q8_lora_iters_0_52_loss_15_2_to_1_99_ckpt_saves_healthy_neoneye.log",
    # promoted from heldout66 after scoring: the last Keras bar's `loss: nanmf:[16]`, a NaN glued to a debug print's
    # text, is no value: 2 of its 3 records read (its nan is found)
    "keras_yolov4_batches_699_701_loss_718_6_then_nan_with_debug_prints_yolov4keras56.log",
    # promoted from heldout67 after scoring: samples/sec declining 10x gradually over 40 records (no excursion; under
    # the 100 records the drop test wants)
    "gluoncv_ssd_epochs_0_19_speed_0_93_to_0_06_samples_per_sec_throughput_decay_sparkszs.log",
    # promoted from heldout69 after scoring: a loop's `ep 0 it 250/1048 Lc 4.645 ..` lines, read now; its epoch of
    # 3x slower iterations (no line times; its unnamed `157s` column is the time elapsed) not found
    "custom_ecg_ssl_pretrain_epochs_0_4_slowdown_350s_per_250_it_at_ep2_then_resume_yuvaraj.log",
    # promoted from heldout74 after scoring: a per-step loss of 0.91 among 0.07-0.19 after 17 records, 0.80 above
    # their median: under the excursion test's excursion_min (1.0), which keeps near-zero losses' blips quiet
    "hf_trainer_state_log_history_steps_1105_1137_loss_0_1_spike_0_91_at_1122_adu3110.log",
    # promoted from heldout76 after scoring: CycleGAN's `cycle_A: 9.355 idt_A: ..`, names with no loss word, jump
    # 10x while its `D_A`/`G_A` losses (read) do not
    "cyclegan_ganilla_epochs_1_17_cycle_a_0_93_to_9_4_14_sustained_jump_at_epoch4_iters_3040_arnaud58.log",
    # promoted from heldout77 after scoring: throughput down 44 % for 2.5 minutes, compute only, under `min_seconds`
    "oneflow_dlrm_criteo_steps_45000_57000_loss_nan_every_record_latency_17_to_31ms_after_eval_oneflow10321.log",
    # heldout78, first replay (not studied)
    "tf_estranet_ascadv2_steps_5000_135000_loss_frozen_5_54_5_55_ln256_chance_gnorm_0_25_to_21_8_1eftone.log",
    # promoted from heldout81 after scoring: its epoch block prints the loss twice, the second line read as the next
    # record (by position), so the inf of epoch 10 is found two records late
    "estrnn_deblur_epochs_8_12_prev_loss_1016826_then_0_046_inf_at_epoch_10_then_0_045_zzhtech43.log",
    # heldout83, first replay (not studied)
    "siastegnet_epochs_52_53_acc_50pct_loss_0_721_stuck_at_chance_siastg1.log",
    # heldout86, first replay (not studied)
    "yolov6_epochs_1_8_iou_l1_cls_loss_zero_obj_loss_0_0009_to_0_0002_map_zero_degenerate_meituan41.log",
    # heldout87, first replay (not studied)
    "keras_dcgan_steps_426_525_then_0_199_fakeloss_frozen_14p3_degenerate_plxiv.log",
    # heldout91, first replay (not studied)
    "paddledet_ppyoloe_plus_amp_epochs_35_51_loss_2p40_to_2p30_found_inf_scale_halving_routine_orionzj.log",
    "paddleocr_ppocrv5_det_db_steps_10_20_loss_pinned_1p0_shrink_threshold_0_degenerate_saifulkamil.log",
    # promoted from heldout92 and heldout93 after scoring: Keras' NaN at the batches' count where the label names the
    # epoch; a compute-only slowdown under min_seconds; a loss part frozen under a moving total; a CSV whose loss
    # columns (`box_om`) the alias table does not know
    "keras_relernn_epochs_308_310_loss_0_2445_to_nan_at_309_val_nan_krcolab26.log",
    "torch7_lua_fcn_alexnet_epoch4_batches_250_450_loss_2_7_flat_step_time_0_83_to_1_34s_slowdown_caunion.log",
    "centernet_ctdet_resdcn101_epochs_1_7_hm_loss_frozen_9p208497_loss_11p5_flat_degenerate_xingyizhou342.log",
    "ultralytics_yolov10n_results_csv_epochs_1_40_box_om_3p48_to_1p27_cls_om_5p50_to_1p73_healthy_thumig.log",
    # heldout94, first replay (not studied)
    "custom_pytorch_gnn_sweep_epochs_620_650_loss_0_42_spike_2_08_at_634_slow_recovery_gomesgroup.log",
    "nmtgminor_transformer_epoch1_batches_1_200_ppl_16615_to_6e278_diverged_overflowerror_math_range_danschum.log",
    # heldout97, first replay (not studied)
    "custom_pytorch_lightgcn_bpr_epochs_0_24_loss_0p693_to_0p13_recall_0p015_to_0p025_healthy_wtt_software.log",
    # heldout98 and heldout99, first replay (not studied)
    "mxnet_module_cornernet_epochs_4_5_loss_flat_8p6_speed_6p2_drops_to_3p4_throughput_bigdeviltjj1.log",
    "pytorch_amp_gan_mudiff_gs_1_801_loss_3_to_4_gradscaler_scale_collapse_to_zero_mariopasc.log",
    "hf_trainer_lrqa_steps_50_950_loss_1.387_to_1.409_degenerate_stuck_at_chance_yuanhuanghuang.log",
    # promoted from heldout94 after scoring: a 2.9x compute slowdown in 64 records, under the excursion ratio (3x)
    # of a log shorter than the throughput rule's min_history
    "custom_pytorch_unimatch_semiseg_epochs_52_59_total_loss_0_03_flat_124_iters_59s_to_173s_throughput_drop_epoch56_"
    "liheyoung.log",
    # heldout100, first replay (not studied)
    "custom_pytorch_sd_watermark_2rank_epochs_1_20_loss_stuck_near_1p0_degenerate_bolin42.log",
    "hf_trainer_kg_llm_lora_state_steps_1_40_loss_4p31_to_0p60_grad_norm_nan_at_1_2_6_overflow_chenguangyang96ucr.log",
    # heldout103, first replay (not studied)
    "trl_dpo_tqdm_steps_154_175_log_history_loss_2p45e9_then_0p0_rewards_nan_sugarandgugu.log",
    # promoted from heldout100 after scoring: one fp16 step skipped (`"grad_norm": Infinity` among finite losses),
    # labelled overflow, reported as NaN, as readers label such steps in other logs
    "hf_trainer_llama2_lora_state_steps_1_40_loss_2p67_to_0p37_grad_norm_inf_at_33_overflow_memasp.log",
})


@pytest.fixture(scope="module")
def score():
    """``benchmarks/real_logs.py --json`` of the whole corpus: ``{"splits": .., "files": {name: outcome}}``."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "real_logs.py"), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return {"splits": out["splits"], "files": {f["file"]: f for f in out["files"]}}


def test_corpus_files_labels_and_sources_agree():
    on_disk = {p.name: split for split in SPLITS for p in (CORPUS / split).iterdir()}
    assert on_disk == {name: lab["split"] for name, lab in LABELS.items()}
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    assert [n for n in on_disk if f"| `{n}` |" not in sources] == []
    assert SHARED_SAMPLES <= {n for n, s in on_disk.items() if s == "tune"}
    # each gathered file's split as gathered: a file moved to tune/ after scoring says where from above its label
    moved = {name: split for split, name in re.findall(r"^# moved from (heldout\d*)/.*\n([^\s:]+):",
                                                       (CORPUS / "labels.yaml").read_text(encoding="utf-8"), re.M)}
    gathered = [moved.get(n, s) for n, s in on_disk.items() if n not in SHARED_SAMPLES]
    tuned = gathered.count("tune") + gathered.count("heldout")
    assert len(on_disk) >= 50 and 0.3 <= gathered.count("heldout") / tuned <= 0.5
    counts = {split: gathered.count(split) for split in GATHERED}
    assert [split for split, least in GATHERED.items() if counts[split] < least] == []
    assert KNOWN_FAILING <= set(on_disk)


def _check(outcome: dict):
    assert outcome["read"], (f"not read: exit {outcome['exit_code']} {outcome['error']}, "
                             f"{outcome['records']} records (at least {outcome['min_records']} expected)")
    assert outcome["missed"] == [], f"missed {outcome['missed']}; replay reported {outcome['events']}"
    assert outcome["false_alarms"] == {}, f"false alarms {outcome['false_alarms']}"


def _mark(names):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="known to fail today"))
            if n in KNOWN_FAILING else n for n in sorted(names)]


@pytest.mark.parametrize("name", _mark(SHARED_SAMPLES))
def test_shared_sample(score, name, record_property):
    record_property("outcome", json.dumps(score["files"][name]))
    _check(score["files"][name])


@pytest.mark.parametrize("name", _mark(set(LABELS) - SHARED_SAMPLES))
def test_corpus_file(score, name, record_property):
    record_property("outcome", json.dumps(score["files"][name]))
    _check(score["files"][name])


def test_split_scores_add_up_the_files(score, record_property):
    """The per-split table the benchmark prints is the sum of its files' outcomes."""
    for split, summary in score["splits"].items():
        record_property(split, json.dumps({k: summary[k] for k in ("found", "labelled", "false_alarms", "read",
                                                                   "files")}))
        files = [f for f in score["files"].values() if f["split"] == split]
        assert summary["files"] == len(files) == sum(lab["split"] == split for lab in LABELS.values())
        assert summary["read"] == sum(f["read"] for f in files)
        assert summary["found"] == sum(len(f["found"]) for f in files)
        assert summary["labelled"] == sum(len(LABELS[f["file"]].get("must", [])) for f in files)
        assert summary["false_alarms"] == sum(len(f["false_alarms"]) for f in files)
        assert len(summary["misses"]) == summary["labelled"] - summary["found"]
