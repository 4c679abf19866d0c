"""A simulator that steps CartPole itself and learns through a policy server (1.13's
rllib/examples/serving/cartpole_client.py after the renames, on gymnasium's 5-tuple API).

Start ``python -m rlstack.examples.serving.cartpole_server`` first, then one or more of::

    python -m rlstack.examples.serving.cartpole_client --inference-mode local
    python -m rlstack.examples.serving.cartpole_client --inference-mode remote --off-policy

Each runs episodes until one returns ``--stop-reward`` (then exits 0).
"""

from __future__ import annotations

import argparse

import gymnasium as gym

from rlstack.env.policy_client import PolicyClient


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-train", action="store_true", help="episodes do not go into training batches")
    parser.add_argument("--inference-mode", type=str, default="local", choices=["local", "remote"])
    parser.add_argument("--off-policy", action="store_true", help="take random actions and log them")
    parser.add_argument("--stop-reward", type=float, default=9999, help="exit once an episode returns this much")
    parser.add_argument("--port", type=int, default=9900, help="the server's port")
    parser.add_argument("--env", default="CartPole-v1", help="the gymnasium env to step")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first reset")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = gym.make(args.env)
    client = PolicyClient(f"http://127.0.0.1:{args.port}", inference_mode=args.inference_mode)
    obs, _ = env.reset(seed=args.seed)
    eid = client.start_episode(training_enabled=not args.no_train)
    rewards = 0.0
    while True:
        if args.off_policy:
            action = env.action_space.sample()
            client.log_action(eid, obs, action)
        else:
            action = client.get_action(eid, obs)
        obs, reward, terminated, truncated, info = env.step(action)
        rewards += reward
        client.log_returns(eid, reward, info=info)
        if terminated or truncated:
            print("Total reward:", rewards, flush=True)
            if rewards >= args.stop_reward:
                print("Target reward achieved, exiting")
                client.end_episode(eid, obs)
                client.close()
                return 0
            client.end_episode(eid, obs)
            rewards = 0.0
            obs, _ = env.reset()
            eid = client.start_episode(training_enabled=not args.no_train)


if __name__ == "__main__":
    raise SystemExit(main())
