"""MLflow models-from-code entry point: logged with each model, executed by `mlflow.pyfunc.load_model`.

Never imported by simpair itself (importing it registers the model object with MLflow).
"""

from mlflow.models import set_model

from simpair.runtime.pyfunc_model import SimpairPyfuncModel

set_model(SimpairPyfuncModel())
