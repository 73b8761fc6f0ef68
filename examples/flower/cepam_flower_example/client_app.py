"""The ClientApp: plain PyTorch training; ``cepam_mod`` turns the reply into a
private, compressed payload (the only cepam line on the client)."""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from cepam.flower import cepam_mod

from . import task

app = ClientApp(mods=[cepam_mod])


@app.train()
def train(msg: Message, context: Context) -> Message:
    cfg = context.run_config
    folder = task.data_dir(str(cfg["data-dir"]))
    x, y, _, _ = task.mnist(folder)
    mine = task.shares(folder, int(cfg["num-clients"]), int(cfg["seed"]))[
        int(context.node_config["partition-id"]) % int(cfg["num-clients"])]
    torch.set_num_threads(1)
    net = task.model(int(cfg["seed"]))
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    generator = torch.Generator().manual_seed(
        hash((int(cfg["seed"]), int(msg.content["config"]["server-round"]), context.node_id))
        % (1 << 63))
    loss = task.train(net, x[mine], y[mine], steps=int(cfg["sgd-steps"]),
                      lr=float(cfg["lr"]), momentum=float(cfg["momentum"]),
                      generator=generator)
    content = RecordDict({"arrays": ArrayRecord(net.state_dict()),
                          "metrics": MetricRecord({"train-loss": loss, "num-examples": len(mine)})})
    return Message(content=content, reply_to=msg)
