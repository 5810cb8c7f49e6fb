"""Lightning's Trainer as a user writes it: a LightningModule logging its loss, the DataLoader,
Trainer(max_epochs=...) with its defaults (progress bar, logger, checkpoints, model summary), or
with --lean all four off."""

from __future__ import annotations

from common import Clock, arguments, loader, model_and_data, optimizer, waiter

if __name__ == "__main__":
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--lean", action="store_true", help="no progress bar, logger, checkpoints")
    args = parser.parse_args()
    import lightning as L
    import torch.nn.functional as F

    net, data = model_and_data(args)
    train = loader(data, args)
    clock = Clock(waiter(args.device))
    samples = len(train) * args.batch_size

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def training_step(self, batch, _index):  # type: ignore[no-untyped-def]
            images, labels = batch
            loss = F.cross_entropy(self.net(images), labels)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return optimizer(self.net)

    class Timing(L.Callback):
        def on_train_epoch_start(self, *_: object) -> None:
            clock.epoch_start()

        def on_train_batch_start(self, *_: object) -> None:
            clock.step()

        def on_train_epoch_end(self, *_: object) -> None:
            clock.epoch_end(samples)

    lean = {"enable_progress_bar": False, "logger": False, "enable_checkpointing": False}
    lean |= {"enable_model_summary": False}
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        precision="bf16-mixed" if args.device == "cuda" else "32-true",
        callbacks=[Timing()],
        default_root_dir=args.work,
        **(lean if args.lean else {}),
    )
    trainer.fit(Classifier(), train)
    clock.report(version=L.__version__)
