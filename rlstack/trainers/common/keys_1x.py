"""RLlib 1.13's config keys, algorithm by algorithm, and what rlstack does with each.

The tables below are 1.13's facts, read with ``ast`` from its ``rllib/agents/*/*.py``
(``COMMON_CONFIG`` and each algorithm's ``DEFAULT_CONFIG``) and ``rllib/models/catalog.py``
(``MODEL_DEFAULTS``): each key's name and its default as the source text 1.13 wrote it.
The tables hold nothing of rlstack's: :func:`key_status` reads rlstack's own tables each
time it is called (each trainer's ``DEFAULT_CONFIG``, ``COMMON_CONFIG``, ``MODEL_DEFAULTS``,
``classic_keys.NO_OP_KEYS``, ``catalog.NO_OP_MODEL_KEYS``, ``config.RENAMED_KEYS`` and ``OPTIMIZER_KEYS``,
``deprecated_keys.DEPRECATED_KEYS``), so a key someone adds to rlstack changes its status
here without an edit. A 1.13 key none of them knows is refused as an unknown key;
:data:`REFUSED_KEYS` says why for the ones that should stay refused, and the others are the
keys still to implement. ``docs/_tools/rllib_1x_keys.py`` writes all of it into
``docs/reference/rllib-1x-keys.md``.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONFIGS_1X",
    "IMPLEMENTED",
    "KeyStatus",
    "MODEL_KEYS_1X",
    "MULTIAGENT_KEYS_1X",
    "NO_EFFECT",
    "REFUSED",
    "REFUSED_KEYS",
    "RENAMED",
    "STATUSES",
    "algorithms",
    "config_1x",
    "key_status",
    "refused_without_reason",
    "statuses",
    "sub_key_status",
    "sub_key_statuses",
]

# Each 1.13 config: (the config it is merged over, ((key, its 1.13 default as source text), ...)).
# "SimpleQ" is here as the base of DQN's. 1.13 merged a dict default into the dict it
# inherited key by key, except an exploration_config naming another "type", which replaced it.
# DEPRECATED_VALUE marks a key 1.13 still took with a deprecation warning.
CONFIGS_1X: dict[str, tuple[str | None, tuple[tuple[str, str], ...]]] = {
    "COMMON": (None, (
        ("num_workers", "2"),
        ("num_envs_per_worker", "1"),
        ("create_env_on_driver", "False"),
        ("rollout_fragment_length", "200"),
        ("batch_mode", "'truncate_episodes'"),
        ("gamma", "0.99"),
        ("lr", "0.0001"),
        ("train_batch_size", "200"),
        ("model", "MODEL_DEFAULTS"),
        ("optimizer", "{}"),
        ("horizon", "None"),
        ("soft_horizon", "False"),
        ("no_done_at_end", "False"),
        ("env", "None"),
        ("observation_space", "None"),
        ("action_space", "None"),
        ("env_config", "{}"),
        ("remote_worker_envs", "False"),
        ("remote_env_batch_wait_ms", "0"),
        ("env_task_fn", "None"),
        ("render_env", "False"),
        ("record_env", "False"),
        ("clip_rewards", "None"),
        ("normalize_actions", "True"),
        ("clip_actions", "False"),
        ("preprocessor_pref", "'deepmind'"),
        ("log_level", "'WARN'"),
        ("callbacks", "DefaultCallbacks"),
        ("ignore_worker_failures", "False"),
        ("recreate_failed_workers", "False"),
        ("log_sys_usage", "True"),
        ("fake_sampler", "False"),
        ("framework", "'tf'"),
        ("eager_tracing", "False"),
        ("eager_max_retraces", "20"),
        ("explore", "True"),
        ("exploration_config", "{'type': 'StochasticSampling'}"),
        ("evaluation_interval", "None"),
        ("evaluation_duration", "10"),
        ("evaluation_duration_unit", "'episodes'"),
        ("evaluation_parallel_to_training", "False"),
        ("in_evaluation", "False"),
        ("evaluation_config", "{}"),
        ("evaluation_num_workers", "0"),
        ("custom_eval_function", "None"),
        ("always_attach_evaluation_results", "False"),
        ("keep_per_episode_custom_metrics", "False"),
        ("sample_async", "False"),
        ("sample_collector", "SimpleListCollector"),
        ("observation_filter", "'NoFilter'"),
        ("synchronize_filters", "True"),
        ("tf_session_args", "{'intra_op_parallelism_threads': 2, 'inter_op_parallelism_threads': 2, 'gpu_options': "
                            "{'allow_growth': True}, 'log_device_placement': False, 'device_count': {'CPU': 1}, "
                            "'allow_soft_placement': True}"),
        ("local_tf_session_args", "{'intra_op_parallelism_threads': 8, 'inter_op_parallelism_threads': 8}"),
        ("compress_observations", "False"),
        ("metrics_episode_collection_timeout_s", "180"),
        ("metrics_num_episodes_for_smoothing", "100"),
        ("min_time_s_per_reporting", "None"),
        ("min_train_timesteps_per_reporting", "None"),
        ("min_sample_timesteps_per_reporting", "None"),
        ("seed", "None"),
        ("extra_python_environs_for_driver", "{}"),
        ("extra_python_environs_for_worker", "{}"),
        ("num_gpus", "0"),
        ("_fake_gpus", "False"),
        ("num_cpus_per_worker", "1"),
        ("num_gpus_per_worker", "0"),
        ("custom_resources_per_worker", "{}"),
        ("num_cpus_for_driver", "1"),
        ("placement_strategy", "'PACK'"),
        ("input", "'sampler'"),
        ("input_config", "{}"),
        ("actions_in_input_normalized", "False"),
        ("input_evaluation", "['is', 'wis']"),
        ("postprocess_inputs", "False"),
        ("shuffle_buffer_size", "0"),
        ("output", "None"),
        ("output_config", "{}"),
        ("output_compress_columns", "['obs', 'new_obs']"),
        ("output_max_file_size", "64 * 1024 * 1024"),
        ("multiagent", "{'policies': {}, 'policy_map_capacity': 100, 'policy_map_cache': None, "
                       "'policy_mapping_fn': None, 'policies_to_train': None, 'observation_fn': None, "
                       "'replay_mode': 'independent', 'count_steps_by': 'env_steps'}"),
        ("logger_config", "None"),
        ("_tf_policy_handles_more_than_one_loss", "False"),
        ("_disable_preprocessor_api", "False"),
        ("_disable_action_flattening", "False"),
        ("_disable_execution_plan_api", "False"),
        ("disable_env_checking", "False"),
        ("simple_optimizer", "DEPRECATED_VALUE"),
        ("monitor", "DEPRECATED_VALUE"),
        ("evaluation_num_episodes", "DEPRECATED_VALUE"),
        ("metrics_smoothing_episodes", "DEPRECATED_VALUE"),
        ("timesteps_per_iteration", "0"),
        ("min_iter_time_s", "DEPRECATED_VALUE"),
        ("collect_metrics_timeout", "DEPRECATED_VALUE"),
    )),
    "A3C": ("COMMON", (
        ("use_critic", "True"),
        ("use_gae", "True"),
        ("rollout_fragment_length", "10"),
        ("lambda", "1.0"),
        ("grad_clip", "40.0"),
        ("lr", "0.0001"),
        ("lr_schedule", "None"),
        ("vf_loss_coeff", "0.5"),
        ("entropy_coeff", "0.01"),
        ("entropy_coeff_schedule", "None"),
        ("min_time_s_per_reporting", "5"),
        ("sample_async", "True"),
        ("_disable_execution_plan_api", "True"),
    )),
    "A2C": ("A3C", (
        ("rollout_fragment_length", "20"),
        ("min_time_s_per_reporting", "10"),
        ("sample_async", "False"),
        ("microbatch_size", "None"),
    )),
    "PPO": ("COMMON", (
        ("use_critic", "True"),
        ("use_gae", "True"),
        ("lambda", "1.0"),
        ("kl_coeff", "0.2"),
        ("sgd_minibatch_size", "128"),
        ("shuffle_sequences", "True"),
        ("num_sgd_iter", "30"),
        ("lr_schedule", "None"),
        ("vf_loss_coeff", "1.0"),
        ("entropy_coeff", "0.0"),
        ("entropy_coeff_schedule", "None"),
        ("clip_param", "0.3"),
        ("vf_clip_param", "10.0"),
        ("grad_clip", "None"),
        ("kl_target", "0.01"),
        ("rollout_fragment_length", "200"),
        ("train_batch_size", "4000"),
        ("lr", "5e-05"),
        ("model", "{'vf_share_layers': False}"),
        ("_disable_execution_plan_api", "True"),
    )),
    "APPO": ("IMPALA", (
        ("vtrace", "True"),
        ("use_critic", "True"),
        ("use_gae", "True"),
        ("lambda", "1.0"),
        ("clip_param", "0.4"),
        ("use_kl_loss", "False"),
        ("kl_coeff", "1.0"),
        ("kl_target", "0.01"),
        ("rollout_fragment_length", "50"),
        ("train_batch_size", "500"),
        ("min_time_s_per_reporting", "10"),
        ("num_workers", "2"),
        ("num_gpus", "0"),
        ("num_multi_gpu_tower_stacks", "1"),
        ("minibatch_buffer_size", "1"),
        ("num_sgd_iter", "1"),
        ("replay_proportion", "0.0"),
        ("replay_buffer_num_slots", "100"),
        ("learner_queue_size", "16"),
        ("learner_queue_timeout", "300"),
        ("max_sample_requests_in_flight_per_worker", "2"),
        ("broadcast_interval", "1"),
        ("grad_clip", "40.0"),
        ("opt_type", "'adam'"),
        ("lr", "0.0005"),
        ("lr_schedule", "None"),
        ("decay", "0.99"),
        ("momentum", "0.0"),
        ("epsilon", "0.1"),
        ("vf_loss_coeff", "0.5"),
        ("entropy_coeff", "0.01"),
        ("entropy_coeff_schedule", "None"),
    )),
    "ARS": ("COMMON", (
        ("action_noise_std", "0.0"),
        ("noise_stdev", "0.02"),
        ("num_rollouts", "32"),
        ("rollouts_used", "32"),
        ("num_workers", "2"),
        ("sgd_stepsize", "0.01"),
        ("observation_filter", "'MeanStdFilter'"),
        ("noise_size", "250000000"),
        ("eval_prob", "0.03"),
        ("report_length", "10"),
        ("offset", "0"),
        ("evaluation_config", "{'num_envs_per_worker': 1, 'observation_filter': 'NoFilter'}"),
    )),
    "SAC": ("COMMON", (
        ("twin_q", "True"),
        ("use_state_preprocessor", "DEPRECATED_VALUE"),
        ("Q_model", "{'fcnet_hiddens': [256, 256], 'fcnet_activation': 'relu', 'post_fcnet_hiddens': [], "
                    "'post_fcnet_activation': None, 'custom_model': None, 'custom_model_config': {}}"),
        ("policy_model", "{'fcnet_hiddens': [256, 256], 'fcnet_activation': 'relu', 'post_fcnet_hiddens': [], "
                         "'post_fcnet_activation': None, 'custom_model': None, 'custom_model_config': {}}"),
        ("clip_actions", "False"),
        ("tau", "0.005"),
        ("initial_alpha", "1.0"),
        ("target_entropy", "'auto'"),
        ("n_step", "1"),
        ("timesteps_per_iteration", "100"),
        ("buffer_size", "DEPRECATED_VALUE"),
        ("replay_buffer_config", "{'_enable_replay_buffer_api': False, 'type': 'MultiAgentReplayBuffer', "
                                 "'capacity': int(1000000.0)}"),
        ("store_buffer_in_checkpoints", "False"),
        ("prioritized_replay", "False"),
        ("prioritized_replay_alpha", "0.6"),
        ("prioritized_replay_beta", "0.4"),
        ("prioritized_replay_eps", "1e-06"),
        ("compress_observations", "False"),
        ("training_intensity", "None"),
        ("optimization", "{'actor_learning_rate': 0.0003, 'critic_learning_rate': 0.0003, 'entropy_learning_rate': "
                         "0.0003}"),
        ("grad_clip", "None"),
        ("learning_starts", "1500"),
        ("rollout_fragment_length", "1"),
        ("train_batch_size", "256"),
        ("target_network_update_freq", "0"),
        ("num_gpus", "0"),
        ("num_workers", "0"),
        ("num_gpus_per_worker", "0"),
        ("num_cpus_per_worker", "1"),
        ("worker_side_prioritization", "False"),
        ("min_time_s_per_reporting", "1"),
        ("_deterministic_loss", "False"),
        ("_use_beta_distribution", "False"),
        ("_disable_execution_plan_api", "True"),
    )),
    "CQL": ("SAC", (
        ("input", "'sampler'"),
        ("input_evaluation", "[]"),
        ("bc_iters", "20000"),
        ("temperature", "1.0"),
        ("num_actions", "10"),
        ("lagrangian", "False"),
        ("lagrangian_thresh", "5.0"),
        ("min_q_weight", "5.0"),
        ("replay_buffer_config", "{'_enable_replay_buffer_api': False, 'type': 'MultiAgentReplayBuffer', "
                                 "'capacity': int(1000000.0)}"),
        ("min_sample_timesteps_per_reporting", "0"),
        ("min_train_timesteps_per_reporting", "100"),
        ("_disable_execution_plan_api", "True"),
        ("buffer_size", "DEPRECATED_VALUE"),
        ("timesteps_per_iteration", "DEPRECATED_VALUE"),
    )),
    "DDPG": ("COMMON", (
        ("twin_q", "False"),
        ("policy_delay", "1"),
        ("smooth_target_policy", "False"),
        ("target_noise", "0.2"),
        ("target_noise_clip", "0.5"),
        ("evaluation_interval", "None"),
        ("evaluation_duration", "10"),
        ("use_state_preprocessor", "False"),
        ("actor_hiddens", "[400, 300]"),
        ("actor_hidden_activation", "'relu'"),
        ("critic_hiddens", "[400, 300]"),
        ("critic_hidden_activation", "'relu'"),
        ("n_step", "1"),
        ("exploration_config", "{'type': 'OrnsteinUhlenbeckNoise', 'random_timesteps': 1000, 'ou_base_scale': 0.1, "
                               "'ou_theta': 0.15, 'ou_sigma': 0.2, 'initial_scale': 1.0, 'final_scale': 0.02, "
                               "'scale_timesteps': 10000}"),
        ("timesteps_per_iteration", "1000"),
        ("evaluation_config", "{'explore': False}"),
        ("buffer_size", "DEPRECATED_VALUE"),
        ("replay_buffer_config", "{'type': 'MultiAgentReplayBuffer', 'capacity': 50000}"),
        ("store_buffer_in_checkpoints", "False"),
        ("prioritized_replay", "True"),
        ("prioritized_replay_alpha", "0.6"),
        ("prioritized_replay_beta", "0.4"),
        ("prioritized_replay_eps", "1e-06"),
        ("compress_observations", "False"),
        ("training_intensity", "None"),
        ("critic_lr", "0.001"),
        ("actor_lr", "0.001"),
        ("target_network_update_freq", "0"),
        ("tau", "0.002"),
        ("use_huber", "False"),
        ("huber_threshold", "1.0"),
        ("l2_reg", "1e-06"),
        ("grad_clip", "None"),
        ("learning_starts", "1500"),
        ("rollout_fragment_length", "1"),
        ("train_batch_size", "256"),
        ("num_workers", "0"),
        ("worker_side_prioritization", "False"),
        ("min_time_s_per_reporting", "1"),
        ("_disable_execution_plan_api", "False"),
    )),
    "TD3": ("DDPG", (
        ("twin_q", "True"),
        ("policy_delay", "2"),
        ("smooth_target_policy", "True"),
        ("target_noise", "0.2"),
        ("target_noise_clip", "0.5"),
        ("exploration_config", "{'type': 'GaussianNoise', 'random_timesteps': 10000, 'stddev': 0.1, "
                               "'initial_scale': 1.0, 'final_scale': 1.0, 'scale_timesteps': 1}"),
        ("learning_starts", "10000"),
        ("actor_hiddens", "[400, 300]"),
        ("critic_hiddens", "[400, 300]"),
        ("n_step", "1"),
        ("gamma", "0.99"),
        ("actor_lr", "0.001"),
        ("critic_lr", "0.001"),
        ("l2_reg", "0.0"),
        ("tau", "0.005"),
        ("train_batch_size", "100"),
        ("use_huber", "False"),
        ("target_network_update_freq", "0"),
        ("num_workers", "0"),
        ("num_gpus_per_worker", "0"),
        ("worker_side_prioritization", "False"),
        ("buffer_size", "1000000"),
        ("prioritized_replay", "False"),
        ("clip_rewards", "False"),
        ("use_state_preprocessor", "False"),
    )),
    "APEX_DDPG": ("DDPG", (
        ("optimizer", "{'max_weight_sync_delay': 400, 'num_replay_buffer_shards': 4, 'debug': False}"),
        ("exploration_config", "{'type': 'PerWorkerOrnsteinUhlenbeckNoise'}"),
        ("n_step", "3"),
        ("num_gpus", "0"),
        ("num_workers", "32"),
        ("buffer_size", "2000000"),
        ("no_local_replay_buffer", "True"),
        ("replay_buffer_shards_colocated_with_driver", "True"),
        ("learning_starts", "50000"),
        ("train_batch_size", "512"),
        ("rollout_fragment_length", "50"),
        ("target_network_update_freq", "500000"),
        ("timesteps_per_iteration", "25000"),
        ("worker_side_prioritization", "True"),
        ("min_time_s_per_reporting", "30"),
    )),
    "SimpleQ": ("COMMON", (
        ("exploration_config", "{'type': 'EpsilonGreedy', 'initial_epsilon': 1.0, 'final_epsilon': 0.02, "
                               "'epsilon_timesteps': 10000}"),
        ("evaluation_config", "{'explore': False}"),
        ("timesteps_per_iteration", "1000"),
        ("target_network_update_freq", "500"),
        ("buffer_size", "DEPRECATED_VALUE"),
        ("prioritized_replay", "DEPRECATED_VALUE"),
        ("learning_starts", "DEPRECATED_VALUE"),
        ("replay_batch_size", "DEPRECATED_VALUE"),
        ("replay_sequence_length", "DEPRECATED_VALUE"),
        ("prioritized_replay_alpha", "DEPRECATED_VALUE"),
        ("prioritized_replay_beta", "DEPRECATED_VALUE"),
        ("prioritized_replay_eps", "DEPRECATED_VALUE"),
        ("replay_buffer_config", "{'_enable_replay_buffer_api': True, 'learning_starts': 1000, 'type': "
                                 "'MultiAgentReplayBuffer', 'capacity': 50000, 'replay_batch_size': 32, "
                                 "'replay_sequence_length': 1}"),
        ("store_buffer_in_checkpoints", "False"),
        ("lr", "0.0005"),
        ("lr_schedule", "None"),
        ("adam_epsilon", "1e-08"),
        ("grad_clip", "40"),
        ("rollout_fragment_length", "4"),
        ("train_batch_size", "32"),
        ("num_workers", "0"),
        ("min_time_s_per_reporting", "1"),
        ("_disable_execution_plan_api", "True"),
    )),
    "DQN": ("SimpleQ", (
        ("num_atoms", "1"),
        ("v_min", "-10.0"),
        ("v_max", "10.0"),
        ("noisy", "False"),
        ("sigma0", "0.5"),
        ("dueling", "True"),
        ("hiddens", "[256]"),
        ("double_q", "True"),
        ("n_step", "1"),
        ("buffer_size", "DEPRECATED_VALUE"),
        ("replay_buffer_config", "{'_enable_replay_buffer_api': True, 'type': 'MultiAgentPrioritizedReplayBuffer', "
                                 "'capacity': 50000, 'prioritized_replay_alpha': 0.6, 'prioritized_replay_beta': "
                                 "0.4, 'prioritized_replay_eps': 1e-06, 'replay_sequence_length': 1}"),
        ("store_buffer_in_checkpoints", "False"),
        ("before_learn_on_batch", "None"),
        ("training_intensity", "None"),
        ("worker_side_prioritization", "False"),
        ("_disable_execution_plan_api", "True"),
    )),
    "APEX": ("DQN", (
        ("optimizer", "merge_dicts(DQN_DEFAULT_CONFIG['optimizer'], {'max_weight_sync_delay': 400, "
                      "'num_replay_buffer_shards': 4, 'debug': False})"),
        ("n_step", "3"),
        ("num_gpus", "1"),
        ("num_workers", "32"),
        ("replay_buffer_config", "{'_enable_replay_buffer_api': False, 'no_local_replay_buffer': True, 'type': "
                                 "'MultiAgentReplayBuffer', 'capacity': 2000000, 'replay_batch_size': 32, "
                                 "'prioritized_replay_alpha': 0.6, 'prioritized_replay_beta': 0.4, "
                                 "'prioritized_replay_eps': 1e-06}"),
        ("replay_buffer_shards_colocated_with_driver", "True"),
        ("learning_starts", "50000"),
        ("train_batch_size", "512"),
        ("rollout_fragment_length", "50"),
        ("target_network_update_freq", "500000"),
        ("timesteps_per_iteration", "25000"),
        ("exploration_config", "{'type': 'PerWorkerEpsilonGreedy'}"),
        ("worker_side_prioritization", "True"),
        ("min_time_s_per_reporting", "30"),
        ("training_intensity", "1"),
        ("_disable_execution_plan_api", "True"),
    )),
    "ES": ("COMMON", (
        ("action_noise_std", "0.01"),
        ("l2_coeff", "0.005"),
        ("noise_stdev", "0.02"),
        ("episodes_per_batch", "1000"),
        ("train_batch_size", "10000"),
        ("eval_prob", "0.003"),
        ("return_proc_mode", "'centered_rank'"),
        ("num_workers", "10"),
        ("stepsize", "0.01"),
        ("observation_filter", "'MeanStdFilter'"),
        ("noise_size", "250000000"),
        ("report_length", "10"),
        ("evaluation_config", "{'num_envs_per_worker': 1, 'observation_filter': 'NoFilter'}"),
    )),
    "IMPALA": ("COMMON", (
        ("vtrace", "True"),
        ("vtrace_clip_rho_threshold", "1.0"),
        ("vtrace_clip_pg_rho_threshold", "1.0"),
        ("vtrace_drop_last_ts", "True"),
        ("rollout_fragment_length", "50"),
        ("train_batch_size", "500"),
        ("min_time_s_per_reporting", "10"),
        ("num_workers", "2"),
        ("num_gpus", "1"),
        ("num_multi_gpu_tower_stacks", "1"),
        ("minibatch_buffer_size", "1"),
        ("num_sgd_iter", "1"),
        ("replay_proportion", "0.0"),
        ("replay_buffer_num_slots", "0"),
        ("learner_queue_size", "16"),
        ("learner_queue_timeout", "300"),
        ("max_sample_requests_in_flight_per_worker", "2"),
        ("broadcast_interval", "1"),
        ("num_aggregation_workers", "0"),
        ("grad_clip", "40.0"),
        ("opt_type", "'adam'"),
        ("lr", "0.0005"),
        ("lr_schedule", "None"),
        ("decay", "0.99"),
        ("momentum", "0.0"),
        ("epsilon", "0.1"),
        ("vf_loss_coeff", "0.5"),
        ("entropy_coeff", "0.01"),
        ("entropy_coeff_schedule", "None"),
        ("_separate_vf_optimizer", "False"),
        ("_lr_vf", "0.0005"),
        ("after_train_step", "None"),
        ("num_data_loader_buffers", "DEPRECATED_VALUE"),
    )),
    "MARWIL": ("COMMON", (
        ("input", "'sampler'"),
        ("input_evaluation", "['is', 'wis']"),
        ("use_gae", "True"),
        ("postprocess_inputs", "True"),
        ("beta", "1.0"),
        ("vf_coeff", "1.0"),
        ("grad_clip", "None"),
        ("lr", "0.0001"),
        ("moving_average_sqd_adv_norm_update_rate", "1e-08"),
        ("moving_average_sqd_adv_norm_start", "100.0"),
        ("train_batch_size", "2000"),
        ("replay_buffer_size", "10000"),
        ("learning_starts", "0"),
        ("bc_logstd_coeff", "0.0"),
        ("num_workers", "0"),
        ("_disable_execution_plan_api", "True"),
    )),
    "BC": ("MARWIL", (
        ("beta", "0.0"),
        ("postprocess_inputs", "False"),
        ("input_evaluation", "[]"),
    )),
    "PG": ("COMMON", (
        ("num_workers", "0"),
        ("lr", "0.0004"),
        ("_disable_execution_plan_api", "True"),
        ("_disable_preprocessor_api", "True"),
    )),
}

MODEL_KEYS_1X: tuple[tuple[str, str], ...] = (
    ("_use_default_native_models", "False"),
    ("_disable_preprocessor_api", "False"),
    ("_disable_action_flattening", "False"),
    ("fcnet_hiddens", "[256, 256]"),
    ("fcnet_activation", "'tanh'"),
    ("conv_filters", "None"),
    ("conv_activation", "'relu'"),
    ("post_fcnet_hiddens", "[]"),
    ("post_fcnet_activation", "'relu'"),
    ("free_log_std", "False"),
    ("no_final_linear", "False"),
    ("vf_share_layers", "True"),
    ("use_lstm", "False"),
    ("max_seq_len", "20"),
    ("lstm_cell_size", "256"),
    ("lstm_use_prev_action", "False"),
    ("lstm_use_prev_reward", "False"),
    ("_time_major", "False"),
    ("use_attention", "False"),
    ("attention_num_transformer_units", "1"),
    ("attention_dim", "64"),
    ("attention_num_heads", "1"),
    ("attention_head_dim", "32"),
    ("attention_memory_inference", "50"),
    ("attention_memory_training", "50"),
    ("attention_position_wise_mlp_dim", "32"),
    ("attention_init_gru_gate_bias", "2.0"),
    ("attention_use_n_prev_actions", "0"),
    ("attention_use_n_prev_rewards", "0"),
    ("framestack", "True"),
    ("dim", "84"),
    ("grayscale", "False"),
    ("zero_mean", "True"),
    ("custom_model", "None"),
    ("custom_model_config", "{}"),
    ("custom_action_dist", "None"),
    ("custom_preprocessor", "None"),
    ("lstm_use_prev_action_reward", "DEPRECATED_VALUE"),
)

MULTIAGENT_KEYS_1X: tuple[tuple[str, str], ...] = (
    ("policies", "{}"),
    ("policy_map_capacity", "100"),
    ("policy_map_cache", "None"),
    ("policy_mapping_fn", "None"),
    ("policies_to_train", "None"),
    ("observation_fn", "None"),
    ("replay_mode", "'independent'"),
    ("count_steps_by", "'env_steps'"),
)

# 1.13 keys rlstack refuses on purpose, and what a user who set one should do instead.
# A sub-key is named "model.KEY" or "multiagent.KEY". A key whose 1.13 default means what
# rlstack does anyway belongs in classic_keys.NO_OP_KEYS (accepted at that value) instead.
REFUSED_KEYS: dict[str, str] = {}

IMPLEMENTED = "implemented"
RENAMED = "renamed"
NO_EFFECT = "accepted, no effect"
REFUSED = "refused"
STATUSES = (IMPLEMENTED, RENAMED, NO_EFFECT, REFUSED)

# The sections whose sub-keys 1.13 listed: section -> its keys.
_SECTIONS = {"model": MODEL_KEYS_1X, "multiagent": MULTIAGENT_KEYS_1X}


@dataclass(frozen=True)
class KeyStatus:
    """What rlstack does with one 1.13 key.

    Attributes:
        key: The key (a sub-key's own name, without its section).
        default_1x: Its 1.13 default as 1.13's source wrote it.
        merged: Whether that default is a dict 1.13 merged into the dict it inherited.
        status: One of :data:`STATUSES`.
        to: ``renamed``: the rlstack keys it sets.
        accepted: ``accepted, no effect``: the values accepted; None: any value.
        reason: ``accepted, no effect``: what rlstack does instead; ``renamed``: how it is
            moved, where that needs saying; ``refused``: :data:`REFUSED_KEYS`' reason, or ""
            for a key not implemented yet.
        rlstack_default: ``implemented``: rlstack's default.
        differs: ``implemented``: rlstack's default is not 1.13's (False where 1.13's is an
            expression that cannot be compared, such as ``DefaultCallbacks``).
        set_from: ``implemented``: the old key whose value 1.13 copied over this one's, by
            which 1.13's default is then compared.
    """

    key: str
    default_1x: str
    merged: bool
    status: str
    to: tuple[str, ...] = ()
    accepted: tuple[Any, ...] | None = ()
    reason: str = ""
    rlstack_default: Any = field(default=None, compare=False)
    differs: bool = False
    set_from: str = ""


def algorithms() -> list[str]:
    """rlstack's algorithms that 1.13 had, in the registry's order."""
    from rlstack.trainers.common.registry import ALGORITHMS

    return [name for name in ALGORITHMS if name in CONFIGS_1X]


def config_1x(name: str) -> dict[str, tuple[str, bool]]:
    """Every key of 1.13's config ``name`` ("COMMON" or an algorithm), inherited ones first.

    Returns:
        key -> (its default's source text, where its own config or the nearest one it is
        merged over sets it; whether that is a dict 1.13 merged into an inherited one).

    Raises:
        KeyError: For a name 1.13 had no config of.
    """
    base, entries = CONFIGS_1X[name]
    keys = config_1x(base) if base else {}
    for key, text in entries:
        keys[key] = (text, key in keys and _merges_into(text, keys[key][0]))
    return keys


def _merges_into(text: str, inherited: str) -> bool:
    new, old = _literal(text), _literal(inherited)
    if not isinstance(new, dict) or not (isinstance(old, dict) or inherited == "MODEL_DEFAULTS"):
        return False
    return not ("type" in new and isinstance(old, dict) and old.get("type") != new["type"])


def key_status(algorithm: str, key: str, defaults: dict[str, Any] | None = None) -> KeyStatus:
    """What rlstack's ``algorithm`` does with the top-level key ``key``, in the order rlstack's
    config merge looks at a key: deprecated, renamed, known, accepted at no effect, refused.

    Args:
        algorithm: An algorithm's name, or "COMMON" for ``COMMON_CONFIG`` alone.
        key: A 1.13 config key.
        defaults: rlstack's defaults of ``algorithm``, when the caller has them already.
    """
    from rlstack.trainers.common import classic_keys, config, deprecated_keys

    if defaults is None:
        defaults = _rlstack_defaults(algorithm)
    text, merged = config_1x(algorithm).get(key, ("", False))
    found = {"key": key, "default_1x": text, "merged": merged}
    if key in deprecated_keys.DEPRECATED_KEYS:
        return KeyStatus(**found, status=RENAMED, to=_successors(deprecated_keys.DEPRECATED_KEYS[key]),
                         reason="with a deprecation warning")
    if key == "optimizer":
        return _optimizer_status(found, defaults, config.OPTIMIZER_KEYS)
    name = config.RENAMED_KEYS.get(key, key)
    if name in defaults:
        if name != key:
            return KeyStatus(**found, status=RENAMED, to=(name,))
        # 1.13 copied an old key that a config still set over its new one (its
        # timesteps_per_iteration over min_sample_timesteps_per_reporting).
        keys = config_1x(algorithm)
        old = next((old for old, new in config.RENAMED_KEYS.items()
                    if new == key and keys.get(old, ("DEPRECATED_VALUE",))[0] != "DEPRECATED_VALUE"), "")
        if old:
            return _implemented({**found, "set_from": old}, defaults[name], *keys[old])
        return _implemented(found, defaults[name], text, merged)
    if classic_keys.is_no_op_key(name, algorithm):
        accepted, instead, _ = classic_keys.NO_OP_KEYS[name]
        return KeyStatus(**found, status=NO_EFFECT, accepted=accepted, reason=instead)
    return KeyStatus(**found, status=REFUSED, reason=REFUSED_KEYS.get(key, ""))


def _optimizer_status(found: dict[str, Any], defaults: dict[str, Any], optimizer_keys: tuple[str, ...]) -> KeyStatus:
    # config.py's rule: an algorithm whose defaults hold ApeX's keys takes them from the
    # sub-dict; every other algorithm accepts only an empty one.
    moved = tuple(key for key in optimizer_keys if key in defaults)
    if moved:
        kept = [key for key in optimizer_keys if key not in defaults]
        return KeyStatus(**found, status=RENAMED, to=moved,
                         reason="the sub-keys of those names" + (f"; {', '.join(kept)}: False only" if kept else ""))
    return KeyStatus(**found, status=NO_EFFECT, accepted=({},),
                     reason="the optimizer is Adam, configured with lr, lr_schedule, adam_epsilon and grad_clip")


def sub_key_status(section: str, key: str) -> KeyStatus:
    """What rlstack does with the 1.13 sub-key ``key`` of ``section`` ("model" or "multiagent").

    Raises:
        KeyError: For another section.
    """
    from rlstack.models import catalog
    from rlstack.trainers.common import config, deprecated_keys

    text = dict(_SECTIONS[section]).get(key, "")
    found = {"key": key, "default_1x": text, "merged": False}
    if section == "model":
        defaults, deprecated, renamed = catalog.MODEL_DEFAULTS, deprecated_keys.DEPRECATED_MODEL_KEYS, {}
        # Keys the catalog accepts only at the values named (it refuses any other value).
        no_effect = catalog.NO_OP_MODEL_KEYS
    else:
        defaults, deprecated, renamed, no_effect = config.COMMON_CONFIG["multiagent"], {}, config.RENAMED_KEYS, {}
    if key in deprecated:
        return KeyStatus(**found, status=RENAMED, to=_successors(deprecated[key]), reason="with a deprecation warning")
    name = renamed.get(key, key)
    if name in no_effect:
        accepted, reason = no_effect[name]
        return KeyStatus(**found, status=NO_EFFECT, accepted=accepted, reason=reason)
    if name in defaults:
        if name != key:
            return KeyStatus(**found, status=RENAMED, to=(name,))
        return _implemented(found, defaults[name], text, False)
    return KeyStatus(**found, status=REFUSED, reason=REFUSED_KEYS.get(f"{section}.{key}", ""))


def statuses(algorithm: str) -> list[KeyStatus]:
    """The status of every key of 1.13's config of ``algorithm`` ("COMMON" for the common keys)."""
    defaults = _rlstack_defaults(algorithm)
    return [key_status(algorithm, key, defaults) for key in config_1x(algorithm)]


def sub_key_statuses(section: str) -> list[KeyStatus]:
    """The status of every 1.13 sub-key of ``section`` ("model" or "multiagent")."""
    return [sub_key_status(section, key) for key, _ in _SECTIONS[section]]


def refused_without_reason() -> dict[str, tuple[str, ...]]:
    """The 1.13 keys rlstack refuses that :data:`REFUSED_KEYS` gives no reason for: the keys
    still to implement, by "COMMON", algorithm (keys beyond the common ones, and common keys
    refused for that algorithm only), "model" and "multiagent"; empty groups left out."""
    common = {status.key for status in statuses("COMMON") if status.status == REFUSED and not status.reason}
    found = {"COMMON": common}
    for algorithm in algorithms():
        found[algorithm] = {status.key for status in statuses(algorithm)
                            if status.status == REFUSED and not status.reason} - common
    for section in _SECTIONS:
        found[section] = {status.key for status in sub_key_statuses(section)
                          if status.status == REFUSED and not status.reason}
    return {group: tuple(sorted(keys)) for group, keys in found.items() if keys}


def _rlstack_defaults(algorithm: str) -> dict[str, Any]:
    if algorithm == "COMMON":
        from rlstack.trainers.common.config import COMMON_CONFIG

        return COMMON_CONFIG
    from rlstack.trainers.common.registry import get_trainer_class

    return get_trainer_class(algorithm).get_default_config()


def _successors(replace: Any) -> tuple[str, ...]:
    # A deprecated key's replacement, from a stand-in value: the keys it sets, with the
    # value of each that does not come from the user's value.
    given = object()
    return tuple(key if value is given else f"{key}={value!r}" for key, value in replace(given, {}).items())


def _implemented(found: dict[str, Any], value: Any, text: str, merged: bool) -> KeyStatus:
    old = _literal(text)
    if old is _UNKNOWN:
        differs = False
    elif merged:
        differs = not isinstance(value, dict) or any(k not in value or not _same(v, value[k]) for k, v in old.items())
    else:
        differs = not _same(old, value)
    return KeyStatus(**found, status=IMPLEMENTED, rlstack_default=value, differs=differs)


_UNKNOWN = object()
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def _literal(text: str) -> Any:
    """The value of a default's source text made of literals and arithmetic (``64 * 1024 *
    1024``, ``int(1e6)``); :data:`_UNKNOWN` for one that names other objects."""
    try:
        return _evaluate(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError):
        return _UNKNOWN


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(element) for element in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_evaluate(k): _evaluate(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float")
            and len(node.args) == 1 and not node.keywords):
        return {"int": int, "float": float}[node.func.id](_evaluate(node.args[0]))
    raise ValueError(f"not a literal: {ast.unparse(node)}")


def _same(a: Any, b: Any) -> bool:
    # Equal as config values: a tuple is a list, but True is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b
