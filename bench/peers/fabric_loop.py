"""Lightning Fabric with the loop a user writes: fabric.setup of the model, the optimizer and
the DataLoader, fabric.backward."""

from __future__ import annotations

from common import Clock, arguments, loader, model_and_data, optimizer, waiter

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    import lightning as L
    import torch.nn.functional as F

    fabric = L.Fabric(
        accelerator="cuda" if args.device == "cuda" else "cpu",
        devices=1,
        precision="bf16-mixed" if args.device == "cuda" else "32-true",
    )
    fabric.launch()
    net, data = model_and_data(args)
    model, opt = fabric.setup(net, optimizer(net))
    train = fabric.setup_dataloaders(loader(data, args))
    clock = Clock(waiter(args.device))
    for _epoch in range(args.epochs):
        clock.epoch_start()
        for images, labels in train:
            clock.step()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            fabric.backward(loss)
            opt.step()
        clock.epoch_end(len(train) * args.batch_size)
    clock.report(version=L.__version__)
