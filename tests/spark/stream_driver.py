"""A streaming job for the crash test: JSON files (one micro-batch each) into
a lance table. ``python -m tests.spark.stream_driver SRC URI CHECKPOINT``."""
import sys


def main(src: str, uri: str, ck: str) -> None:
    from lance_ops.spark.session import local_session

    spark = local_session("stream-driver", conf={"spark.sql.shuffle.partitions": "2"})
    q = (spark.readStream.format("json").schema("id long, v string").option("maxFilesPerTrigger", 1).load(src)
         .writeStream.format("lance").option("checkpointLocation", ck).trigger(availableNow=True).start(uri))
    q.awaitTermination()
    spark.stop()
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
