import sys

from minikafka.broker.cli import main

sys.exit(main())
