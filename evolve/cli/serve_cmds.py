"""`evolve serve GEN`: an OpenAI-compatible chat endpoint serving a generation's weights with its prompt.

    evolve serve RUN:3 --port 8011            # then: base_url http://127.0.0.1:8011/v1, model "RUN:3"
    evolve serve --policy policies/smollm2-135m-instruct.toml --prompt prompts/chat-coder.toml
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from evolve.errors import ConfigError


def serve_cmd(
    generation: str | None = typer.Argument(None, help="A lineage generation RUN:INDEX (or id) to serve."),
    policy: Path | None = typer.Option(None, "--policy", help="Serve a policy spec's base weights instead of GEN."),
    prompt: Path | None = typer.Option(None, "--prompt", help="Seed-prompt TOML whose text is served as the "
                                       "system message (default: GEN's prompt version; none with --policy)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; anything but loopback needs --token."),
    port: int = typer.Option(8011, "--port", min=0, max=65535, help="TCP port (0 = any free port)."),
    token: str | None = typer.Option(None, "--token", envvar="EVOLVE_SERVE_TOKEN",
                                     help="Bearer token every request must carry (env EVOLVE_SERVE_TOKEN)."),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, help="Cap on max_tokens per request."),
    db: str | None = typer.Option(None, "--db", help="Lineage database (for GEN)."),
) -> None:
    """Serve /v1/chat/completions for a generation (weights + its evolved prompt) until interrupted."""
    from evolve.policy.serve import check_bind

    if (generation is None) == (policy is None):
        raise ConfigError("give exactly one of GEN (RUN:INDEX) or --policy SPEC")
    check_bind(host, token)  # before loading a model for nothing
    from evolve.cli.policy_cmds import _from_generation
    from evolve.policy import PolicySpec, load_policy
    from evolve.policy.serve import ChatService, make_server
    from evolve.prompt.candidate import system_text

    with tempfile.TemporaryDirectory(prefix="evolve-serve-") as tmp:
        if generation is not None:
            spec, ckpt, components = _from_generation(generation, db, Path(tmp))
        else:
            spec, ckpt, components = PolicySpec.from_toml(policy), None, {}
        if prompt is not None:
            from evolve.prompt.seed import load_seed_prompt

            components = dict(load_seed_prompt(prompt).components)
        if spec.backend == "litellm":
            raise ConfigError("this generation's weights live behind an API (litellm backend); nothing to serve")
        pol = load_policy(spec, checkpoint_dir=ckpt)
        name = generation or spec.name or spec.model
        server = make_server(ChatService(pol, system_text(components), name, max_tokens), host, port, token,
                             log=lambda s: typer.echo(s, err=True))
        bound = server.server_address
        typer.echo(f"serving {name} on http://{bound[0]}:{bound[1]}/v1 (model {name!r}); Ctrl-C stops", err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            pol.close()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
