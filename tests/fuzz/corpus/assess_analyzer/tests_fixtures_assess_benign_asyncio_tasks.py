import asyncio

async def work(n):
    await asyncio.sleep(0.01)
    return n * n

async def main():
    results = await asyncio.gather(*(work(i) for i in range(10)))
    print(sum(results))

asyncio.run(main())
