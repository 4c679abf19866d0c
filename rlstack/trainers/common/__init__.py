"""The trainer machinery every algorithm shares, kept apart from the algorithm folders:
``trainer`` the Trainer base (a Tune ``Trainable``: set-up, one iteration and its result,
acting, evaluation, the per-policy steps of multi-agent runs, save / restore);
``config`` ``COMMON_CONFIG`` and the merge and validation every config goes through;
``classic_keys`` the RLlib 1.x keys accepted at a value that changes nothing;
``multi_agent`` the ``multiagent`` config read into policy specs and checked;
``registry`` the algorithms, found by the declaration each algorithm package makes, and
their names for Ray Tune; ``off_policy`` the replay-based training step of DQN, SAC,
TD3 and DDPG; ``replay_config`` 1.13's ``replay_buffer_config`` mapped onto rlstack's
replay keys; ``distributed_replay`` Ape-X's replay shards and learner thread;
``evolution`` the noise table, numpy evaluation actors and iteration that ES and ARS
share; ``checkpoint_files`` the checkpoint directory's format (its manifest, hashes and
atomic save); ``result_logger`` the result files a standalone trainer writes;
``ray_start`` starting a local Ray. RLlib 1.13's module paths ``rlstack.trainers.trainer``,
``rlstack.trainers.callbacks`` and ``rlstack.trainers.registry`` stay where they were,
re-exporting the public names.
"""
