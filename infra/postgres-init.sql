-- The MLflow backend store lives next to Prefect's database on the same Postgres server.
CREATE DATABASE mlflow OWNER simpair;
