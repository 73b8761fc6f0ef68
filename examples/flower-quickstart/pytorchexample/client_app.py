"""pytorchexample: A Flower / PyTorch app (the quickstart's ClientApp, with cepam)."""

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from cepam.flower import cepam_mod  # cepam

from pytorchexample.task import Net, load_data
from pytorchexample.task import test as test_fn
from pytorchexample.task import train as train_fn

# Flower ClientApp
app = ClientApp(mods=[cepam_mod])  # cepam: was ClientApp()


def _model(msg: Message) -> Net:
    torch.set_num_threads(1)
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return model


def _loaders(context: Context):
    return load_data(int(context.node_config["partition-id"]),
                     int(context.node_config["num-partitions"]),
                     int(context.run_config["batch-size"]),
                     train_size=int(context.run_config["train-size"]),
                     folder=str(context.run_config["data-dir"]))


@app.train()
def train(msg: Message, context: Context):
    """Train the model on local data."""
    model = _model(msg)
    trainloader, _ = _loaders(context)
    train_loss = train_fn(model, trainloader, int(context.run_config["local-epochs"]),
                          float(msg.content["config"]["lr"]))
    model_record = ArrayRecord(model.state_dict())
    metrics = {"train_loss": train_loss, "num-examples": len(trainloader.dataset)}
    content = RecordDict({"arrays": model_record, "metrics": MetricRecord(metrics)})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context):
    """Evaluate the model on local data."""
    model = _model(msg)
    _, valloader = _loaders(context)
    eval_loss, eval_acc = test_fn(model, valloader)
    metrics = {"eval_loss": eval_loss, "eval_acc": eval_acc,
               "num-examples": len(valloader.dataset)}
    content = RecordDict({"metrics": MetricRecord(metrics)})
    return Message(content=content, reply_to=msg)
