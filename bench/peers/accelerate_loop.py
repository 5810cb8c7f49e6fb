"""Hugging Face accelerate with the loop a user writes: accelerator.prepare of the model, the
optimizer and the DataLoader, accelerator.backward."""

from __future__ import annotations

from common import Clock, arguments, loader, model_and_data, optimizer, waiter

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    import accelerate
    import torch.nn.functional as F

    accelerator = accelerate.Accelerator(
        cpu=args.device == "cpu", mixed_precision="bf16" if args.device == "cuda" else "no"
    )
    net, data = model_and_data(args)
    model, opt, train = accelerator.prepare(net, optimizer(net), loader(data, args))
    clock = Clock(waiter(args.device))
    for _epoch in range(args.epochs):
        clock.epoch_start()
        for images, labels in train:
            clock.step()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            accelerator.backward(loss)
            opt.step()
        clock.epoch_end(len(train) * args.batch_size)
    clock.report(version=accelerate.__version__)
